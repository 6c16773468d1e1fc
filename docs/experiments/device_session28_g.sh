# Session 28, call G: the session's last code (820b95c and after) on the GPU: the input-residual tests
# (the N = K check in the emitted forward, the review's fixes), the element operands' (the input read
# by a broadcast tail, Dropout's mask), and the gate's planted faults (validate's checks of outputs
# without gradient are in its path).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "gpu tests"
timeout 420 python3 -m pytest -m gpu -q -rfEx tests/test_input_residual.py tests/test_element_operands.py \
  tests/test_faults.py > $OUT/g_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/g_gpu_tests.log | cut -c1-300
t done
