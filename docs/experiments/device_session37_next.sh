# What session 36 leaves for the next session's device time (issues 24, 25).
#
# 0. (~500 s, nvidia-h200-x4 where lent) KernelBench's eval at bf16 and fp16 on all 36 files with
#    max-autotune timed, for the family's medians against the faster of eager and max-autotune
#    (session 33: 1.069x bf16 / 1.083x fp16; not measured since: no four-GPU host was lent):
#      GPUS=4 KB_FLAGS="--autotune" PRECISIONS="bf16 fp16" EVAL_LIMIT=250 bash scripts/device_kernelbench.sh
#    (tar $OUT at the end: a call returns at most eight files)
#
# 1. The 16-bit training steps at M = 1024 look host-bound (session 36, call C: KernelBench 14's
#    rewrite file 0.63-0.99 ms a step where its kernels should take ~0.1 ms; the wgmma files' steps
#    0.88-1.46x eager bf16). Profile one step with Nsight Systems (the GPU's idle gaps, the host's
#    launches) before changing the Python around the ops:
#      nsys profile -o $OUT/step python3 docs/experiments/s36/gemv_training.py REF WGMMA GEMV bf16
#
# 2. The forward's next lever (session 35's plan, unchanged): GroupNorm whose groups fit the 16-bit
#    GEMM's tile, fused into its epilogue (37, 62, 75, 88, 94): tile-local statistics in torch's
#    Welford order, the row-kernel path kept for the GEMMs that cannot (skinny, split-K, fallback,
#    fp32 builds), the 16-bit tier's GroupNorm tests on the GPU.
#
# 3. Issue 25 needs an H100: nothing new since session 28.
echo "a plan, not a script: read it"
