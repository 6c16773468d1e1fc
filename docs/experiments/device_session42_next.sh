# What session 41 leaves for the next session's device time (issues 24, 25).
#
# Session 41 put a 16-bit module's eager training on a C++ autograd node: the host queues the
# 1024 x 8192 files' steps as fast as eager's, and the bf16 / fp16 family medians are 0.98x /
# 1.01x eager. What is left above eager is the GPU's (call D, s37/step_kernels.py, bf16, per step):
#
# 1. The staged backward's row kernel recomputes the forward chain in every pass: 99 (GELU, then
#    softmax over 8192) 112 us against eager's gelu_backward + softmax_backward + sum 41 us (five
#    erff, five expf and three divisions an element over four passes; 27 registers, 4 CTAs an SM,
#    two waves of 1024 rows: compute-bound); 66 (softmax over 16384, 128 rows: 128 CTAs of 512
#    threads, latency-bound) 51 us against eager's 12; 84 90 us. Levers: keep the first
#    reduction's input in the row cache in place of z once read (each thread owns its columns:
#    no barrier; the last pass rereads z from L2 where it needs it); 1024 threads where the rows
#    are fewer than the SMs' CTA slots (the forward's row kernels must keep kRowThreads = 512:
#    eager_sum.cuh models torch's reduction order with it); a row constant factored out of a
#    pass's sum (66's and 99's third pass sums g v / r^2: one pass earlier as sum(g v)).
# 2. A 16-bit build keeps z in fp32 (M x N floats): 45 (16384 x 4096) writes 268 MB of z in its
#    forward (its first part's epilogue 110 us, eager's 0) and its backward's point-wise kernel
#    reads it (186 us against eager's sigmoid_backward 90 us on the bf16 output). z in the
#    module's dtype halves both, at eager's rounding of the activation (the gate's yardstick):
#    measure the gradients' errors before keeping it.
# 3. kgen's 16-bit GEMM at 45's shapes (16384 x 2048 -> 4096, then -> 1024): 633 us against
#    cuBLAS's 509 a step.
# 4. The C++ node builds on first training use (23-24 s alone on the H200 host, then cached): a
#    16-bit search's first full validation pays it; build it beside the kernels in build_all.
# 5. Issue 24's H100 goals and the four-GPU host's max-autotune medians; issue 25 needs an H100.
echo "a plan, not a script: read it"
