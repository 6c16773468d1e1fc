# What session 38 leaves for the next session's device time (issues 24, 25).
#
# 0. KernelBench 98's 16-bit training step got slower with the pooled weight (session 38, call F:
#    bf16 0.769 -> 1.149 ms, 1.09x -> 1.39x eager; fp16 1.15x -> 1.41x): the means' backward runs in
#    torch (MeanBackward divides the expanded dW', 0.23 ms a call for fp32 W under the profiler, and
#    more in 16 bits). Try, timed with docs/experiments/s38/means_backward.py (fix its 16-bit
#    rows first: base.to(torch.float32) is base itself, so the later dtypes' w is not a leaf):
#    the sum's expand (the 1/k folded into the epilogue as a scale of z, or into W' after the sum),
#    a custom autograd.Function whose backward writes dW in one pass, and the means computed with
#    dW' by a kernel of kgen's (the expand written by the kernel that computes dW').
#
# 1. The fp16 family table of one training step (session 37 ran fp32 and bf16):
#      DTYPE=fp16 bash docs/experiments/device_session37_b.sh   (about 550 s for 36 files)
#
# 2. A bf16 training step is the host's wherever its GEMMs are short (session 37). Next trims, each
#    an A/B in one process with docs/experiments/s37/step_kernels.py: the backward kernels reading
#    g in the module's dtype and writing dz in it; the column sums zeroed by the C entry
#    (cudaMemsetAsync) instead of torch.zeros; the rewrite's (M, 1) output written in the module's
#    dtype by its kernel.
#
# 3. Forward levers: GroupNorm in the 16-bit GEMM's epilogue (37, 62, 75, 88, 94). Session 38's
#    16-bit 98 forward timed 0.09 ms in every run but call D's (0.10-0.20, bimodal): look once more.
#
# 4. On a host of four GPUs: the max-autotune medians of issue 24 (session 33's command), with 98
#    at its new time.
# 5. Issue 25 needs an H100.
echo "a plan, not a script: read it"
