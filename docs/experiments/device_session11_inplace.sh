# Session 11, ninth device call: eager inference updates an fp32 module's BatchNorm buffers in
# place (no copy before the launch, none back after it; the custom op, for autograd and
# torch.compile, still works on copies). Files before/after (s11files/h<NUM>_{a_old,b_new}.py,
# untracked, carried) timed as KernelBench times; the BatchNorm GPU tests and full gates.
# Carry .kb (KernelBench).
. scripts/device_setup.sh
for f in s11files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for spec in "33 fp32" "84 fp32" "33 bf16"; do set -- $spec
  t "host time $1 $2"
  timeout 100 python3 docs/experiments/s11/host_time.py $(ls .kb/level2/${1}_*.py) --dtype $2 s11files/h${1}_*.py 2>&1 | tee $OUT/inplace_$1_$2.log | sed -n '1,4p'
done
t "gpu tests"
timeout 300 python3 -m pytest -m gpu -q -rA -n 4 tests/test_faults.py tests/test_custom_ops.py tests/test_half_gpu.py \
  -k "num_batches or unmodified or compile or (forward_and_buffers and bn)" > $OUT/inplace_tests.log 2>&1; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/inplace_tests.log | cut -c1-160
for f in generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py; do
  t "kgen validate $f"
  kgen validate $f > $OUT/inplace_validate_$(basename $f .py | cut -c1-20).log 2>&1; echo "exit $?"; grep -E "FAIL" $OUT/inplace_validate_*.log | cut -c1-150; tail -1 $OUT/inplace_validate_$(basename $f .py | cut -c1-20).log
done
t done
