# Session 20: asin, acos, asinh, acosh, atanh. tests/test_ops.py's accuracy test (each CUDA
# expression against fp64 beside torch's fp32 kernel), then `kgen validate` of the file kgen
# generate writes for docs/experiments/s20/refs/inverse_functions.py in fp32 and bf16
# (gradients through the new derivatives included).
. scripts/device_setup.sh
t "gpu ops test"
timeout 200 python3 -m pytest -m gpu -q tests/test_ops.py -k accurate -s > $OUT/gpu_ops.log 2>&1; tail -2 $OUT/gpu_ops.log
grep -E "^(asin|acos|asinh|acosh|atanh) " $OUT/gpu_ops.log
kgen generate docs/experiments/s20/refs/inverse_functions.py -o /tmp/inv.py --force > /dev/null
t "build"
timeout 200 python3 -m kgen.tune.worker build /tmp/inv.py > /dev/null 2>&1 & timeout 200 python3 -m kgen.tune.worker build --dtype bf16 /tmp/inv.py > /dev/null 2>&1 & wait
for dt in fp32 bf16; do
  t "validate $dt"
  timeout 120 kgen validate /tmp/inv.py --ref docs/experiments/s20/refs/inverse_functions.py --dtype $dt > $OUT/validate_inverse_$dt.log 2>&1
  grep -E "FAIL|gradients|training|passed" $OUT/validate_inverse_$dt.log | cut -c1-200
done
t done
