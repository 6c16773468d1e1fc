# Session 42, call F: the autocast GPU tests at the session's final code (a one-element
# gradient's allowance of two steps, calls D-E), and KernelBench's own eval of two files at fp32
# and bf16 (the emitted forward's new first and last lines under KernelBench's eval).
source scripts/device_setup.sh
t "half autocast"
gpu_tests f_half_autocast.log 230 tests/test_half_gpu.py -k "autocast"
t "kernelbench"
NUMS="12 97" PRECISIONS="fp32 bf16" EVAL_LIMIT=60 timeout 200 bash scripts/device_kernelbench.sh
t "end"
