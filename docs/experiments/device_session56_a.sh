# Session 56, call A: session 55's CPU-only commits on the GPU (the one-sample rows input, e9f6397;
# zero_if_inf as fabsf(x) == INFINITY), then KernelBench's eval at fp32 on all 36 files (last run on
# all 36 in session 51).
export GPU_TESTS="tests/test_rows_input_gpu.py tests/test_infinite_rows_gpu.py"
export GPU_TESTS_LIMIT=180 PRECISIONS=fp32 EVAL_LIMIT=330
bash scripts/device_kernelbench.sh
