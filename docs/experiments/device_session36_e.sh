# Session 36, call E (35f40f2, the review's mends): the rewrite's backward tests with the module
# whose chain reads values computed from parameters, the rewrite's 16-bit tests, the refs'
# rewrite, the constant output, the custom ops, and a few of the staged backward's GPU tests
# (the emitted backward's C call moved into _kgen_call_backward).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
gpu_tests gemv.log 260 tests/test_gemv_backward.py tests/test_gemv_half.py tests/test_constant_gpu.py
gpu_tests refs.log 200 tests/test_refs_gpu.py tests/test_custom_ops.py -k "matrix_vector or compile or graph or backward or train"
gpu_tests backward.log 100 tests/test_backward_gpu.py -k "fp32_exact and (swish or softmax or groupnorm)"
t done
cd $OUT && tar cf /tmp/e.tar * && rm -f * && mv /tmp/e.tar $OUT/e.tar
