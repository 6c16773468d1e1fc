# Session 20: torch.special.ndtr. tests/test_ops.py's accuracy test, then `kgen validate` of the
# file kgen generate writes for docs/experiments/s20/refs/gelu_by_ndtr.py (x * ndtr(x), then
# softmax) in fp32 and bf16, gradients included.
. scripts/device_setup.sh
t "gpu ops test"
timeout 200 python3 -m pytest -m gpu -q tests/test_ops.py -k accurate -s > $OUT/gpu_ops.log 2>&1; tail -2 $OUT/gpu_ops.log
grep -E "^(ndtr|erf|erfc) " $OUT/gpu_ops.log
kgen generate docs/experiments/s20/refs/gelu_by_ndtr.py -o /tmp/ndtr.py --force > /dev/null
t "build"
timeout 200 python3 -m kgen.tune.worker build /tmp/ndtr.py > /dev/null 2>&1 & timeout 200 python3 -m kgen.tune.worker build --dtype bf16 /tmp/ndtr.py > /dev/null 2>&1 & wait
for dt in fp32 bf16; do
  t "validate $dt"
  timeout 120 kgen validate /tmp/ndtr.py --ref docs/experiments/s20/refs/gelu_by_ndtr.py --dtype $dt > $OUT/validate_ndtr_$dt.log 2>&1
  grep -E "FAIL|gradients|training|passed" $OUT/validate_ndtr_$dt.log | cut -c1-200
done
t done
