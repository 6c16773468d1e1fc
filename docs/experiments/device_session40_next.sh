# What session 39 leaves for the next session's device time (issues 24, 25).
#
# 0. Where the rest of a 16-bit step's host time goes. Session 39 (calls F, G) found the main
#    thread's CPU time within 0.04-0.16 ms of eager's and most of the extra queue time (0.3-0.6 ms)
#    spent waiting in backward() for autograd's device thread, which runs the part's vjp in Python
#    (eager's backward is C++). Measure it there: time.thread_time() summed inside
#    _kgen_part<K>_vjp (the device thread's CPU), and the engine's handoffs (a no-op
#    autograd.Function's backward beside it), with docs/experiments/s39/step_ab.py interleaving
#    eager and the files. Removing tensor ops from the vjp bought ~1 % for three (call G): the
#    lever, if any, is the vjp as a whole (its Python, once_differentiable's no_grad, the
#    conversions of g to fp32 and of dz to the module's dtype), or the part's backward as a C++
#    autograd node (a torch extension: compile time to weigh against the ~0.2 ms a step).
#
# 1. KernelBench 98 in 16 bits: its step is 1.145x / 1.143x eager (call D, interleaved) against
#    959b065's 1.049x / 1.064x; the means' autograd nodes are the difference. An autograd.Function
#    (new style) cost more (its apply binds arguments by inspect.signature: the forward 0.09 ->
#    0.28 ms). Untried: an old-style Function (no setup_context; torch.func would then refuse it,
#    so only where no functorch transform is active), or the means inside the part's op.
#
# 2. Forward levers (session 38's list): GroupNorm in the 16-bit GEMM's epilogue (37, 62, 75, 88,
#    94); 98's bimodal 16-bit forward (0.09 ms in every run but session 38's call D).
#
# 3. On a host of four GPUs: the max-autotune medians of issue 24 (session 33's command), with 98
#    at its new time.
# 4. Issue 25 needs an H100.
echo "a plan, not a script: read it"
