# H100: BatchNorm's affine input prefix folded into finalize (issue 9's remaining gap).
# PART=tests: GPU tests of the BatchNorm paths; otherwise the 1e-4 searches of 33/39/84 and the BN module of
# tests/refs; logs and results under $OUT.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
start=$(date +%s)
if [ "${PART:-search}" = tests ]; then
  timeout 560 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_faults.py tests/test_refs_gpu.py -k "not test_refs_gpu or bn" > $OUT/gpu_bn.log 2>&1
  tail -15 $OUT/gpu_bn.log
  exit 0
fi
run() { echo "=== $* (t=$(( $(date +%s) - start ))s)"; timeout 150 python3 -m kgen.cli search "$@" 2>&1 | grep -v "^\s*$" | tail -25; tar czf $OUT/results.tgz generated results; }
{
run --problem gemm_scale_bn --tol 1e-4 --math tf32x3 --top 3
run --problem gemm_scale_bn --batch 16384 --in 4096 --out 4096 --tol 1e-4 --math tf32x3 --top 3
run --problem gemm_bn_scale_softmax --tol 1e-4 --math tf32x3 --top 3
run tests/refs/gemm_bn_gelu_relu.py --tol 1e-4 --math tf32x3 --top 3
} > $OUT/search.log 2>&1
grep -E "^===|fastest valid|no candidate|x eager|eager" $OUT/search.log | head -40
