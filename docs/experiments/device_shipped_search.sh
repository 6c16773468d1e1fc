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
# issue 8's 1e-4 winners (baseline/, from commit 8faa4a4) against the new winners, interleaved
export PYTHONPATH=.
for p in gemm_scale_bn_b1024_i8192_o8192 gemm_scale_bn_b16384_i4096_o4096; do
  timeout 100 python3 scripts/compare_forward.py kgen/refs/gemm_scale_bn.py baseline/${p}_tol0.0001.py generated/${p}_tol0.0001.py 2>&1 | tail -5
done
timeout 100 python3 scripts/compare_forward.py kgen/refs/gemm_bn_scale_softmax.py baseline/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py 2>&1 | tail -5
