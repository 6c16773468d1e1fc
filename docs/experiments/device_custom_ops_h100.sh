# The custom ops on one GPU (logs under $OUT): their GPU tests (torch.compile fullgraph, CUDA
# graph capture, the backward error), the shipped problems' tier (validation goes through the
# ops now), a subset of the modules' tier, and the forward time of problems 33 and 84 before the
# ops (BASELINE/, files of the commit before) against now (generated/), each right after eager.
. scripts/device_setup.sh
t "custom ops"
timeout 200 python3 -m pytest -m gpu -q tests/test_custom_ops.py > $OUT/gpu_custom_ops.log 2>&1
tail -15 $OUT/gpu_custom_ops.log
if [ -n "${BASELINE:-}" ]; then
  t compare
  for p in gemm_scale_bn_b1024_i8192_o8192 gemm_bn_scale_softmax_b1024_i8192_o8192; do
    ref=kgen/refs/${p%%_b1024*}.py
    timeout 120 python3 scripts/compare_forward.py $ref $BASELINE/${p}_tol0.0001.py generated/${p}_tol0.0001.py 2>&1 | tail -4
  done 2>&1 | tee $OUT/compare.log
fi
t shipped
timeout ${SHIPPED_LIMIT:-200} python3 -m pytest -m gpu -q tests/test_gpu.py > $OUT/gpu_shipped.log 2>&1
tail -5 $OUT/gpu_shipped.log
t "refs ${TEST_REFS:-dropout,min_bias,bn_gelu}"
KGEN_TEST_REFS=${TEST_REFS:-dropout,min_bias,bn_gelu} timeout ${REFS_LIMIT:-150} python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
tail -5 $OUT/gpu_refs.log
t done
