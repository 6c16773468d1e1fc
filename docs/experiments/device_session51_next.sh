# What session 50 leaves for the next session's device time (issues 24, 25).
#
# Session 50: fp16x3 keeps w's split from call to call (gemm_wgmma_f16x3.cuh, w_split_floats; the
# file's _KGEN_W_SPLITS), w's pass hashing every row and splitting again the rows that changed:
# 12's kernels 725 -> 668 us a forward (H200), KernelBench's timing 0.283x -> 0.273x eager fp32,
# its eval 4 of 4 (12, 33, 51, 84). Not GPU-run: what the review after the device time mended
# (perf.md, session 50's last paragraph): no split kept in a capture or in CUDA graph trees'
# warm-up, none for a computed weight, the records first in the buffer and written last, the view's
# strides in the key, the plain dictionary. Run first, and re-time 12's pass (it should read as
# call D's, 92.6 us):
#   tests/test_w_split_gpu.py (14: reduce-overhead and captures among them)
#   tests/test_keep_z_gpu.py -k fp16x3, tests/test_split_k_gpu.py -k fp16x3,
#   tests/test_custom_ops.py -m gpu, tests/test_fp16x3.py -m gpu
#
# 1. w's pass at short rows: 39's (4096 rows of 16 KB) reads 64 MB in ~30 us where 12's reads 256
#    MB in ~73 (a block's latency over little data: the row, the block's sums, the record). Two
#    rows a block, or 128 threads a row below 4096 columns; s50/split_bench.py's harness (add w's
#    kernel and a kept split). With w changed each call it is +13 us of 39's ~2950 a forward.
# 2. KernelBench's own eval at fp32 on all 36 (scripts/device_kernelbench.sh): the 22 files at
#    1024 x 8192 -> 8192 should move as 12, 33, 84 did; the table in perf.md is session 23's H100.
# 3. From session 50's plan: a 16-bit module's kept z in its own dtype (gradients against fp64
#    first); an fp32 module's training forward with the body before the autograd.Function's
#    apply; 55's 1e-2 search; issue 24's H100 goals and issue 25's (an H100 needed).
echo "a plan, not a script: read it"
