# What session 35 leaves for the next session's device time (issues 24, 25).
#
# 0. (~500 s, nvidia-h200-x4 where lent) KernelBench's eval at bf16 and fp16 on all 36 files with
#    max-autotune timed, for the family's medians against the faster of eager and max-autotune
#    at session 35's code (session 33: 1.069x bf16 / 1.083x fp16; since then 37 1.15 -> 1.05 ms,
#    45 0.83 -> 0.78, 51 0.51 -> 0.113 (the matrix-vector rewrite), 75 0.27 -> 0.26; session 35's
#    one-GPU run without max-autotune: 36 / 36 each, 0.930x / 0.933x eager):
#      GPUS=4 KB_FLAGS="--autotune" PRECISIONS="bf16 fp16" EVAL_LIMIT=250 bash scripts/device_kernelbench.sh
#    (a call returns at most eight files: tar $OUT at the end, as device_session35_d.sh does)
#
# 1. The next lever: GroupNorm whose groups fit the 16-bit GEMM's tile, fused into its epilogue
#    (WsEpilogue): 37 (groups of 64), 62 and 75 (16), 88 and 94 (32) all divide BN = 128 and 256.
#    Today stage 1 stores S and a row kernel normalizes it: 37 is 1.05 ms (GEMM 0.73, row kernel
#    0.32) against max-autotune's 0.70. Needs a tile-local statistics pass in torch's Welford order
#    (as the row kernel's 16-bit GroupNorm takes them), a plan that keeps the row-kernel path for
#    the GEMM paths that cannot (skinny, split-K, the fallback GEMM, the fp32 builds), and the
#    16-bit tier's GroupNorm tests on the GPU.
#
# 2. Issue 25 needs an H100: nothing new since session 28.
echo "a plan, not a script: read it"
