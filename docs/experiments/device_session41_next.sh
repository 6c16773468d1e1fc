# What session 40 leaves for the next session's device time (issues 24, 25).
#
# 0. The 16-bit step's remaining host time (session 40, call A: s40/vjp_host.py). Any Python
#    autograd node costs a bf16 step of KernelBench 12 ~0.1 ms (eager with one identity Function:
#    1.10-1.14x eager's step), and the part's vjp ~0.29 ms of the device thread's CPU (two torch
#    GEMMs, the C entry's four launches, the launcher's Python). Untried: a leaner launcher (the
#    ctypes argument list built by position once per part; no new_empty(0) for a d_input no tail
#    reads; the column sums' conversion folded into the merge kernel); a C++ autograd node (a torch
#    extension: its compile time against ~0.1 ms a step); torch.compile(mode="reduce-overhead") or
#    CUDA graphs around a user's step, measured and documented as the way to a host-free step.
#
# 1. The typed backward's last fp32 copies: a broadcast tail's (TailBackward::grad reads an fp32
#    g: KernelBench 75) and the matrix-vector rewrite's (its rows read g[m]: small). And 37's
#    GroupNorm step keeps z in fp32 (M x N floats): its peak memory 1632 MiB against eager's 2256
#    already.
#
# 2. The fp16 family training table at this code (session 39's was 1.083x median at c398ae0), and
#    the bf16 table after de40b75 (call F ran at 625ffe9, before the row kernels were typed).
#
# 3. KernelBench 98 in 16 bits: 1.40x eager in call F's table (host-bound; the means' autograd
#    nodes). An autograd.Function for the means costs a Python node (~0.1 ms) itself: measure
#    before building.
#
# 4. Forward levers (session 38's list): GroupNorm in the 16-bit GEMM's epilogue (37, 62, 75, 88,
#    94); on a host of four GPUs the max-autotune medians of issue 24; issue 25 needs an H100.
echo "a plan, not a script: read it"
