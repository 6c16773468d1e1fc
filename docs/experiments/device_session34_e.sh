# Session 34, call E: the rest of call D's GPU tier, which its limits cut (the epilogue's operands
# read once a thread, 93d3bb3): the 16-bit forward of the modules after gemm_sigmoid_gemm_lse, the
# odd-shape full gate of the kgen (mma.sync) family in fp32, and 16-bit gradients of a few modules.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
KGEN_TEST_REFS=sigmoid_gemm_lse,sigmoid_sum,sum_max,swish_scale,matmul_ gpu_tests e_half.log 120 tests/test_half_gpu.py -k "forward_and_buffers"
gpu_tests e_refs.log 110 tests/test_refs_gpu.py -k "odd_shape and kgen"
KGEN_TEST_REFS=swish_scale,groupnorm_hardtanh,matmul_gelu gpu_tests e_grad.log 60 tests/test_half_gpu.py -k "gradients"
t done
