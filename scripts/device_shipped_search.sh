# Searches of the shipped problems (33, 39, 84) at both tiers with the current kernels, so that
# generated/ holds winners measured with the code that is committed; logs under $OUT.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
start=$(date +%s)
run() { echo "=== $* (t=$(( $(date +%s) - start ))s)"; timeout 170 python3 -m kgen.cli search "$@" 2>&1 | grep -v "^\s*$" | tail -25; tar czf $OUT/results.tgz generated results; }
{
run --problem gemm_scale_bn --tol 1e-4 --tol 1e-2
run --problem gemm_scale_bn --batch 16384 --in 4096 --out 4096 --tol 1e-4 --tol 1e-2
run --problem gemm_bn_scale_softmax --tol 1e-4 --tol 1e-2
} > $OUT/search.log 2>&1
grep -E "^===|fastest valid|no candidate|replaced|same variant" $OUT/search.log
