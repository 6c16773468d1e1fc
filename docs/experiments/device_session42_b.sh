# Session 42, call B: call A's tests again after its fixes (the dtype read from the forward's torch
# calls, in-place ops and 16-bit modules included; the build for autocast, which rounds no op's
# result to the dtype).
source scripts/device_setup.sh
t "dtype rule"
gpu_tests b_autocast_dtype.log 150 tests/test_autocast_dtype_gpu.py
t "half autocast"
gpu_tests b_half_autocast.log 380 tests/test_half_gpu.py -k autocast
t "end"
