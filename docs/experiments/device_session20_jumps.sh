# Session 20: the jump mask leaves out whole rows where a row op (softmax) carries a jump into
# its row (kgen/check/kinks.py jump_mask). tests/test_ops.py's accuracy test (floor_divide by 0
# no longer trips it), test_where's GPU tests (the other jumping modules), then `kgen validate`
# of session 19's two floor-division modules in fp32, logs whole.
. scripts/device_setup.sh
t "gpu ops test, where tests"
timeout 240 python3 -m pytest -m gpu -q tests/test_ops.py tests/test_where.py -k "accurate or gpu_where" > $OUT/gpu_ops_where.log 2>&1; tail -3 $OUT/gpu_ops_where.log
grep -E "floor_divide" $OUT/gpu_ops_where.log | head -8
mkdir -p /tmp/s20v
for n in div_floor_mode floordiv_operator; do
  kgen generate docs/experiments/s19/refs/$n.py -o /tmp/s20v/$n.py --force > /dev/null || echo "generate failed: $n"
  (timeout 200 python3 -m kgen.tune.worker build /tmp/s20v/$n.py > /dev/null 2>&1 || echo "build failed: $n") &
done; wait
for n in div_floor_mode floordiv_operator; do
  t "validate $n"
  timeout 120 kgen validate /tmp/s20v/$n.py --ref docs/experiments/s19/refs/$n.py > $OUT/validate_$n.log 2>&1
  grep -E "FAIL|batch|KernelBench|passed" $OUT/validate_$n.log
done
t done
