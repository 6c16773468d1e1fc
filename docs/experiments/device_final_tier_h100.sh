# The GPU test tier in device calls of at most 10 minutes (logs under $OUT):
# PART=1: the shipped problems' tier, the planted faults (the backward ones too), the backward
# and custom-op tests; PART=2: every module of tests/refs/.
. scripts/device_setup.sh
if [ "${PART:-1}" = 1 ]; then
  t "shipped + faults"
  timeout 390 python3 -m pytest -m gpu -q -rA tests/test_gpu.py tests/test_faults.py > $OUT/gpu_shipped.log 2>&1
  tail -1 $OUT/gpu_shipped.log; grep -E "^(FAILED|ERROR)|^E " $OUT/gpu_shipped.log | head -12
  t "backward + custom ops"
  timeout 175 python3 -m pytest -m gpu -q tests/test_backward_gpu.py tests/test_custom_ops.py > $OUT/gpu_backward.log 2>&1
  tail -1 $OUT/gpu_backward.log; grep -E "^(FAILED|ERROR)|^E " $OUT/gpu_backward.log | head -12
else
  t refs
  timeout 330 python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
  tail -1 $OUT/gpu_refs.log; grep -E "^(FAILED|ERROR)|^E " $OUT/gpu_refs.log | head -12
fi
t done
