# Session 57, call D: the Linear's one rounding on the GPU (tests/test_linear_rounding_gpu.py: the
# gate in fp32 and bf16 on F.linear with a computed bias, addmm's alpha and beta, and the input
# scaled by a number before the GEMM, at K = 300; bf16 errors within 1.25x eager's).
. scripts/device_setup.sh
t tests; gpu_tests tests.log 270 tests/test_linear_rounding_gpu.py
t done
