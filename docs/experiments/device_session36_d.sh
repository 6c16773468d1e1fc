# Session 36, call D: the constant output's zero gradients (test_constant_gpu's full gate now judges
# them and the training check), the custom-op tests, the rewrite's backward tests once more, then
# KernelBench's eval on the files these touch (14, 18, 51 the matrix-vector rewrite's, 80 the
# constant's) at fp32, bf16 and fp16.
GPU_TESTS="tests/test_constant_gpu.py tests/test_custom_ops.py tests/test_gemv_backward.py" GPU_TESTS_LIMIT=200 \
  NUMS="14 18 51 80" PRECISIONS="fp32 bf16 fp16" EVAL_LIMIT=110 bash scripts/device_kernelbench.sh
cd $OUT && tar cf /tmp/d.tar * && rm -f * && mv /tmp/d.tar $OUT/d.tar
