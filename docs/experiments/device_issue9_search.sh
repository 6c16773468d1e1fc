# H100 searches of issue 9: the shipped problems (both tiers) and the reference modules of
# tests/refs/ (tol 1e-4, 3xTF32, the three fastest tiles of each family); logs under $OUT.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
start=$(date +%s)
run() { echo "=== $* (t=$(( $(date +%s) - start ))s)"; timeout 150 python3 -m kgen.cli search "$@" 2>&1 | grep -v "^\s*$" | tail -25; tar czf $OUT/results.tgz generated results; }
{
for r in ${REFS:-matmul_sub_mul_relu gemm_sigmoid_sum gemm_swish_scale gemm_mul_leakyrelu matmul_gelu_softmax matmul_scale_residual gemm_bn_gelu_relu}; do
  run tests/refs/$r.py --tol 1e-4 --math tf32x3 --top 3
done
run --problem gemm_scale_bn --tol 1e-4 --tol 1e-2
run --problem gemm_scale_bn --batch 16384 --in 4096 --out 4096 --tol 1e-4 --tol 1e-2
run --problem gemm_bn_scale_softmax --tol 1e-4 --tol 1e-2
} > $OUT/search.log 2>&1
grep -E "^===|fastest valid|no candidate" $OUT/search.log
