# Session 23: how long a full `kgen validate` of the shipped 1024x8192->8192 softmax file takes
# with the training check's new form (issue 22's 30 s), twice (the second with the build cached),
# then tests/test_fp16x3.py's gate tests under the new check.
. scripts/device_setup.sh
f=generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py
for i in 1 2; do
  t "validate $i"
  /usr/bin/time -f "wall %e s, max rss %M KB" kgen validate $f > $OUT/s23_validate_softmax_$i.log 2>&1
  grep -E "training|passed|took|wall|extension" $OUT/s23_validate_softmax_$i.log | cut -c1-300
done
t "fp16x3 gate tests"
timeout ${F16_LIMIT:-300} python3 -m pytest -m gpu -v -rfE --tb=short -n 3 tests/test_fp16x3.py > $OUT/s23_fp16x3_tests.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/s23_fp16x3_tests.log | cut -c1-300 | tail -8
t done
