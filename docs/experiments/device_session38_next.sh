# What session 37 leaves for the next session's device time (issues 24, 25).
#
# 0. First, the GPU run of what session 37 changed after its device time was spent (f9df8f9,
#    8d8faf7, f736781; all CPU-tested only):
#      - the fp64 judge's Dropout masks (kgen/check/masks.py): `kgen validate` of KernelBench 66's
#        file in fp32 and bf16 (every check of it in training mode now compares against an fp64
#        reference of the same mask: expect errors at eager's, not eager's 60 % of the gradient),
#        `tests/test_bench_training_gpu.py` (66's bound in fp32 and bf16), the dropout refs'
#        GPU tests (`tests/test_refs_gpu.py -k dropout`, `tests/test_element_operands.py -k 66`),
#        and a search of 66 (its maths probe's eager error is fp32's rounding now, not two masks');
#      - the 16-bit backward's autocast guard (8d8faf7): `tests/test_half_gpu.py -k backward`,
#        `tests/test_custom_ops.py` (a bf16 training step under torch.compile and CUDA graphs);
#      - the gate's g rounded to the module's dtype and frozen parameters (f736781):
#        `tests/test_half_gpu.py -k gradients`, `tests/test_backward_gpu.py -k "groupnorm or softmax"`.
#
# 1. The fp16 family table of one training step (session 37 ran fp32 and bf16):
#      DTYPE=fp16 bash docs/experiments/device_session37_b.sh   (about 550 s for 36 files)
#
# 2. A bf16 training step is the host's wherever its GEMMs are short (session 37: host 1.2-1.4 ms
#    against eager's 0.8 for 1024 x 8192 -> 8192). Next trims, each an A/B in one process with
#    docs/experiments/s37/step_kernels.py: the backward kernels reading g in the module's dtype and
#    writing dz in it (two conversions a step, 46 + 33 us of GPU on 33); the column sums zeroed by
#    the C entry (cudaMemsetAsync) instead of torch.zeros; the rewrite's (M, 1) output written in
#    the module's dtype by its kernel (one conversion a forward).
#
# 3. Forward levers, unchanged: GroupNorm in the 16-bit GEMM's epilogue (37, 62, 75, 88, 94);
#    Linear -> AvgPool1d(k) as a GEMM of W pooled by k (KernelBench 98: k = 16, a sixteenth of the
#    GEMM; dW through torch's autograd of the pooling, as a computed weight's).
#
# 4. On a host of four GPUs: the max-autotune medians of issue 24 (session 33's command).
# 5. Issue 25 needs an H100.
echo "a plan, not a script: read it"
