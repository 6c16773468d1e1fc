# Session 41, call F: a ModelNew inside torch.autocast (its input in the other dtype: converted to
# the module's, the kernels the module dtype's, bit for bit; said once), and the C++ node's test,
# on three modules of tests/refs (KGEN_TEST_REFS).
# Run as: timeout 240 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
export KGEN_TEST_REFS=gemm_mul_leakyrelu,gemm_bn_gelu_relu,matmul_gelu_softmax
gpu_tests t_autocast.log 200 tests/test_half_gpu.py -k "autocast or cpp_node or refuses"
t done
