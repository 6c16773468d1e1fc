# Session 43, call C: the rest of the GPU tests that the parameter type (kernels/common.cuh,
# Param) and the entry's new argument types touch: the whole 16-bit tier (its plain builds: g and
# dz in Operand, the column sums in Param), the fp32 backward, and KernelBench's own eval of two
# BatchNorm files and 76 at fp32 and bf16 (the entry's signature, the forward's new lines).
source scripts/device_setup.sh
t "16-bit tier"
gpu_tests c_half.log 220 tests/test_half_gpu.py -k "not autocast and not output_written"
t "fp32 backward"
gpu_tests c_backward.log 100 tests/test_backward_gpu.py
t "kernelbench"
NUMS="33 97 76" PRECISIONS="fp32 bf16" EVAL_LIMIT=60 timeout 180 bash scripts/device_kernelbench.sh
t "end"
