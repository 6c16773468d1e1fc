# Session 53, call I: the last code (13aaba1: the tracer's state checks, refusals' messages, the
# device name, --tile's stages) on the GPU: KernelBench's eval at fp32 on six of its files and at
# bf16 on three, and the narrow-output GPU gate cases again.
source scripts/device_setup.sh
G="tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too"
gpu_tests i_gpu.log 200 "$G[gemm_mul_leakyrelu-1000-shape9]" "$G[gemm_sigmoid_gemm_lse-1000-shape12]" &
NUMS="12 30 39 56 76 99" PRECISIONS=fp32 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | grep -E "of [0-9]+ correct|build failed" | head -5
wait
NUMS="33 66 97" PRECISIONS=bf16 EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep -E "of [0-9]+ correct|build failed" | head -5
t end
