# What session 48 leaves for the next session's device time (issues 24, 25).
#
# Session 48: a bare launch of a file's kernels timed beside the file under KernelBench's timing
# (s48/host_ceiling.py: 33 in bf16 78 us behind it, all Python before the launch); the part's call
# of its C entry written out in the entry's order, autocast's state asked once a forward, a
# BatchNorm's tensors read once, the wgmma GEMMs' shared memory allowed once per kernel and device:
# 33 1.080x -> 1.016x eager by KernelBench's timing (s47/kb_timing_ab.py, 11 rounds), 12 1.047x ->
# 1.041x; KernelBench's own eval at bf16 36 of 36, median 0.978x eager by its own timing. Every GPU
# test of the launch's paths passed on the new code (test_gpu 59, custom_ops 10, skinny 24,
# constant 27, half cpp_node 18, half BatchNorm 18, KernelBench autocast BatchNorm files 5).
#
# 1. The fp32 z a training-mode forward keeps (KernelBench's timing wants gradients): 12 us of 12's
#    ~210 in bf16 (call A: bare launch with z 198.5 vs without 186.9). A point-wise part's forward
#    keeping z is two kernels (backward.cuh, forward_keeping_z): the GEMM stores the fp32
#    accumulator with StoreEpilogue (32 MB at 12's shape), then pointwise_kernel reads it back and
#    writes the output (16 MB in bf16). One GEMM epilogue that stores both (tile_epilogue in
#    common.cuh: z as it is into the kept buffer, EPI(z) into p.z, as every family's epilogue
#    stores through it) would drop z's read and a launch (~7 us of HBM at 12's shape), for fp32
#    and 16-bit modules alike, the same bits (the point-wise pass computes EPI on the same fp32 z).
#    Then, for a 16-bit module, z kept in its dtype would halve the rest, but changes the
#    backward's input (the unrounded accumulator today): gradients to be checked against fp64
#    beside eager's. Staged parts (BatchNorm, rows) run their stages in place on z_out: leave those.
# 2. An fp32 module's training forward (KernelBench's fp32 track times this path): the
#    autograd.Function's apply precedes the kernels' launch. Running the body first under no_grad
#    and handing its outputs to the Function (as _kgen_native_call does for the C++ node) moved the
#    launch ~2.5 us earlier on the CPU stand-in (not kept in session 48: measure on the GPU first).
# 3. Re-time s48/host_ceiling.py on the new files (12, 33, 66 in bf16; 66 and 12 in fp32) on one
#    host with more rounds: what remains between each file and its bare launch.
# 4. From earlier plans: 55's 1e-2 search; the round16 CTAs at a few rows (X = T) to lower
#    AUTOCAST_FP32_WEIGHT_MIN_ROWS; the autocast step's dx GEMM on the fp32 weight; issue 24's H100
#    goals and issue 25 (an H100 needed).
echo "a plan, not a script: read it"
