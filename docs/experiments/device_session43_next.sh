# What session 42 leaves for the next session's device time (issues 24, 25).
#
# Session 42 made an fp32 module inside torch.autocast compute as eager's Linear does there (its
# 16-bit kernels through a build for autocast, the output in eager's dtype): KernelBench 12 under
# bf16 autocast 2.25x -> 0.96x eager autocast's time, 37 0.73x -> 0.42x (docs/perf.md).
#
# 1. GPU-run what landed after call F: 52bee3a (a training BatchNorm's fp32 output converted to
#    eager's dtype under autocast; tests/test_half_gpu.py -k autocast has the new assertion) and
#    0470ab2 (EmittedFile.build of a 16-bit dtype builds the C++ node: a bf16 search's builds log
#    the node's ~24 s once; its first validation no longer does).
# 2. torch.compile (fullgraph) and CUDA graphs of a file inside autocast: the op's fake kernel
#    gives the last part's fp32 output from torch.is_autocast_enabled at trace time (untested).
# 3. The autocast table for all 36 files (s42/autocast_ab.py per file, or `kgen bench` grown an
#    --autocast option): inference and a training step against eager autocast.
# 4. fp32 parameters and buffers inside a 16-bit build (a parameter type of its own, KGEN_PARAM,
#    where common.cuh's Param is the operand type today; the entry signatures' parameters, the
#    backward's column sums, the C++ node's column_grads dtype): a training BatchNorm under
#    autocast in 16 bits (now the fp32 kernels: 33, 39, 41, 84, 97), a parameter eager adds in fp32
#    kept fp32 (76's output error 1.8x eager autocast's), and issue 24's item 2 (kgen's own BF16
#    GEMM for fp32 modules at 1e-2, the build for autocast run outside it).
# 5. W converted to 16 bits on every call under autocast (eager too): ~0.1 ms of 12's 0.35.
# 6. Session 41's levers (docs/experiments/device_session42_next.sh): the staged backward's row
#    kernels, z in 16 bits, the 16-bit GEMM at 45's shapes; issue 24's H100 goals; issue 25.
echo "a plan, not a script: read it"
