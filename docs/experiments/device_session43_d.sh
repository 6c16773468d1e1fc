# Session 43, call D: KernelBench's 36 published files inside bf16 autocast with kgen's kernels
# (new tests/test_kernelbench_autocast_gpu.py: training mode, a forward and a backward, output,
# gradients and running buffers against fp64 with eager autocast's error as the yardstick).
source scripts/device_setup.sh
t "kernelbench under autocast"
gpu_tests d_kb_autocast.log 420 -s tests/test_kernelbench_autocast_gpu.py
t "end"
