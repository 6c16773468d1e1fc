# Session 43, call A: what session 42 landed after its last GPU call (52bee3a: a training
# BatchNorm's fp32 output converted to eager's dtype under autocast; 0470ab2: a 16-bit build makes
# the C++ node too), and torch.compile / CUDA graphs of an fp32 module inside autocast (new test).
source scripts/device_setup.sh
t "half autocast"
gpu_tests a_half_autocast.log 240 tests/test_half_gpu.py -k "autocast"
t "custom ops, native node"
gpu_tests a_custom_ops.log 240 tests/test_custom_ops.py tests/test_native_backward.py
t "end"
