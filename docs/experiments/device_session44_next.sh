# What session 43 leaves for the next session's device time (issues 24, 25).
#
# Session 43: the build for torch.autocast keeps parameters and buffers in fp32 (kernels/common.cuh,
# Param), so a training BatchNorm computes in 16 bits there too (33 and 97: a training step 2.5x ->
# 0.91-0.97x eager autocast's); the ops take the autocast decision as an argument (torch.compile
# under autocast ran the other build); the module's input read after the GEMM goes to the kernels
# as it comes. KernelBench's 36 files under bf16 autocast: 36 of 36 within eager's error, median
# 0.89x eager autocast (a training step 0.97x) (docs/perf.md, session 43).
#
# 1. GPU-run what landed after call F: the autocast tests' shared judgement
#    (tests/test_half_gpu.py's assert_within_eager_autocast_error, used by
#    tests/test_kernelbench_autocast_gpu.py: the same checks, moved), _kgen_launch's docstring, and
#    _kgen_build's refusal of a dtype the file does not run (CPU-tested):
#      gpu_tests x.log 300 tests/test_kernelbench_autocast_gpu.py tests/test_half_gpu.py -k autocast
# 2. KernelBench 14 under autocast is 8.5x eager autocast: its default file is cuBLAS fp32 (the row
#    sum in eager's order, for KernelBench's 1e-4), which has no 16-bit build. A file whose fp32
#    variant has none could carry kgen's 16-bit kernels for autocast (and for .to(bf16)).
# 3. torch.compile (default and max-autotune) of the reference under autocast as a third column of
#    s43/autocast_table.py: issue 24 asks for ratios against both in the dtype.
# 4. The slowest training steps under autocast: 99 1.10x, 45 1.09x, 12 1.07x, 63 1.05x, 41 1.05x
#    (s37/step_kernels.py under autocast: which kernels and host time differ from eager's).
# 5. W converted to 16 bits on every call under autocast (eager too, outside autocast's cache of
#    one region): 0.08 ms of 12's 0.349.
# 6. Issue 24's H100 goals and issue 25 (both need an H100); session 41's levers
#    (docs/experiments/device_session42_next.sh).
echo "a plan, not a script: read it"
