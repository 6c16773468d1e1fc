# What session 49 leaves for the next session's device time (issues 24, 25).
#
# Session 49: a point-wise part's training forward keeps z in the GEMM's epilogue (KeepingZ,
# common.cuh), one kernel where there were two, the same bits (s49/same_bits.py); kernels per
# forward 12 bf16 190.0 -> 185.1 us, 12 fp32 730.0 -> 721.5, 59 and 86 even; KernelBench's timing
# 12 bf16 1.052x -> 1.016x eager. z by cp.async.bulk (s49/keep_z_bulk_stores.patch) measured no
# better and was not kept. KernelBench's eval at bf16 passed the 14 files with a point-wise part.
# 3d64e71 (forward_impl leaves out a point-wise part's GEMM that stored z alone: compile time)
# and the tidying after call D were not GPU-run: run tests/test_keep_z_gpu.py and
# tests/test_half_gpu.py -k "gradients or autocast" first, and tests/test_tail_backward.py (a
# broadcast tail's core value is KeepingZ's output there).
#
# 1. w's fp16 split, cached (issue 25: fp32-exact nearer the floor). 12's fp32 file (fp16x3, 1024
#    rows) spends 147 us of its 725 a forward in f16x3_split_kernel, most of it splitting w
#    (256 MB read, 256 MB written) into fp16 hi and lo, the same result on every call while w is
#    unchanged (gemm_wgmma_f16x3.cuh, launch: w's halves in the per-call workspace). A split kept
#    per module, keyed by w's data pointer and torch's version counter (an optimizer's in-place
#    step bumps it), would leave x's split alone per call (~15 us). The hazard: writes through
#    `w.data` do not bump the version a tensor reports; the file must say what it keys on, or
#    check the cache some other way (a checksum pass reads w once: ~55 us, still ~75 us saved).
#    Memory: one more w in fp16 x2 (as large as w itself). 29 of KernelBench's 36 fp32 files run
#    fp16x3 above 512 rows (their w split per call): the 22 at 1024 x 8192 -> 8192 would save
#    ~17 % of a forward, 51 and 53 (2048 rows) ~9 %, the 16384-row ones (39, 40, 41, 45) and 37
#    under 1 % (w is small beside x there). Measure 12, 33, 84 in fp32 at 1024 rows and 39 at
#    16384 (s49/kernel_times.py for the kernels, s47/kb_timing_ab.py).
# 2. For a 16-bit module, z kept in the module's dtype (half of z's bytes in the forward's
#    epilogue and in the backward's dz pass). Eager's backward reads bf16 intermediates too, but
#    kgen's today reads the unrounded fp32 accumulator: check gradients against fp64 beside
#    eager's (test_half_gpu's gradient tests) before keeping it. The z_out layout (kept_core,
#    entry.cuh) and the Python allocation change with it.
# 3. From earlier plans: an fp32 module's training forward with the body run before the
#    autograd.Function's apply (~2.5 us on the CPU stand-in); s48/host_ceiling.py re-timed on the
#    new files; 55's 1e-2 search; round16 CTAs at a few rows; issue 24's H100 goals and issue 25
#    (an H100 needed).
echo "a plan, not a script: read it"
