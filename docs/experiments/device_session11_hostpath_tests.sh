# Session 11, eighth device call: the BatchNorm semantics after the host-path change (the batch
# count after the launch unless momentum is None): the planted missing-count fault and the
# unmodified file, torch.compile / CUDA graphs, and the full gate (momentum=None included) of the
# shipped BatchNorm files.
. scripts/device_setup.sh
t "gpu tests"
timeout 330 python3 -m pytest -m gpu -q -rA -n 4 tests/test_faults.py tests/test_custom_ops.py \
  -k "num_batches or unmodified or compile" > $OUT/hostpath_tests.log 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/hostpath_tests.log | cut -c1-160
for f in generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py; do
  t "kgen validate $f"
  kgen validate $f > $OUT/validate_$(basename $f .py).log 2>&1; echo "exit $?"; grep -E "momentum|num_batches|FAIL" $OUT/validate_$(basename $f .py).log | cut -c1-150; tail -1 $OUT/validate_$(basename $f .py).log
done
t done
