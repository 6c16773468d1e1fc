# Session 14: mish as x * n (n + 2) / (n (n + 2) + 2), n = exp(x) (one expf, where torch's form
# calls expf, log1pf and tanhf). The op table's GPU accuracy test (each CUDA expression as
# accurate against fp64 as torch's own fp32 kernel), KernelBench 29 (two Mish) before and after
# timed in one process (scripts/compare_forward.py, fp32 and bf16), and KernelBench's eval on the
# three files with Mish (22, 29, 94) at fp32 and bf16. Files: s14cmp/ (kgen generate at 16bbfd5
# and after the change).
. scripts/device_setup.sh
for f in s14cmp/k29_before.py s14cmp/k29_after.py; do
  (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") &
  (timeout 300 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed bf16: $f") &
done
(python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_ops.py > $OUT/ops_gpu.log 2>&1; tail -2 $OUT/ops_gpu.log) &
wait
for d in fp32 bf16; do
  t "compare 29 before / after, $d"
  python3 scripts/compare_forward.py .kb/level2/29_Matmul_Mish_Mish.py s14cmp/k29_before.py s14cmp/k29_after.py --dtype $d 2>&1 | tail -6
done
PRECISIONS="fp32 bf16" NUMS="22 29 94" bash scripts/device_kernelbench.sh
