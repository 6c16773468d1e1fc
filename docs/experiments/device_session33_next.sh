# What session 32 leaves for the next session's device time (issues 24, 25).
#
# 1. (~2 min) The one GPU check session 32 could not rerun: tests/test_rows_input_gpu.py after its
#    floor was corrected (df957aa; row_max's dx, exact in eager, 1.5e-8 in kgen's 3xTF32):
#      GPU_TESTS="tests/test_rows_input_gpu.py" GPU_TESTS_LIMIT=200 PRECISIONS= bash scripts/device_kernelbench.sh
#
# 2. (~4 min, kind nvidia-h200-x4, carry .kb) KernelBench's eval at bf16 and fp16 on all 36 at the
#    final code, with max-autotune's times (session 32's call F ran before the GroupNorm change):
#      GPUS=4 KB_FLAGS="--autotune" PRECISIONS="bf16 fp16" EVAL_LIMIT=300 bash scripts/device_kernelbench.sh
#    Call F took 237 s for bf16 alone (max-autotune's compiles of 9 files a GPU ~190 s).
#
# 3. What stands between kgen and max-autotune in bf16 (docs/perf.md, session 32), largest first:
#    a. The 16-bit GEMM's cost per tile outside its mainloop at short K: KernelBench 37 (K = 1024)
#       0.859 ms against cuBLAS's 0.384; 45's first GEMM (K = 2048). The persistent kernel with the
#       epilogue overlapped (sessions 30-31's plan: the chain in the consumers' registers with its
#       per-column operands staged in shared memory, bf16 stored by TMA from a small staging tile,
#       the producer filling the next tile's stages meanwhile).
#    b. GroupNorm of groups of 32-64 in 16 bits (37's row kernel, ~0.7 ms after session 32): one
#       Welford reduction per group keeps eager's bits; the output pass's per-column loads. A patch
#       is ready to time: docs/experiments/s32/welford_pow2_div.patch (a count's power-of-two
#       divisions as exact products: the same bits on the host).
#    (Also first: 6401605, GroupNorm's size constant only at the traced width, has not run on a
#    GPU: the GroupNorm GPU tests and same_bits.py on 75 / 62 / 37 against 864f196's files.)
#    c. S in fp32 between the GEMM and a row kernel: where S is one of the module's rounded ops,
#       the module's dtype holds it exactly in half the bytes (the point-wise stage 2 does this
#       already: forward.py, module_typed); the row function would read 16-bit rows.
echo "a plan, not a script: read it"
