# What session 54 leaves for the next session's device time (issues 24, 25).
#
# Session 54: an fp32 module's eager training runs each part's C++ autograd node (a small
# module's step 1.36-1.69x -> 0.88-1.23x eager); four probes' fixes (a forward refuses a hooked
# or swapped submodule, a kink probe's second direction, norm_sqrt, Dropout traced whatever mode
# __init__ leaves, relu at NaN, div's divisor gradient, flatten(start_dim=1), ParameterList reads,
# pickle, the reference's defaults put back).
#
# 1. d6f665b (EmittedFile puts torch's default device back after a file's reference sets it) ran
#    on the CPU only: kgen validate ab-style on a reference with torch.set_default_device("cuda")
#    at import and self.cuda() in __init__ (call H's cuda_init: 16 of 18 before it).
# 2. A forward's host time in training mode is still ~1.5-2x eager's at small sizes (s54/
#    forward_ab.py): the C++ node costs about what the Python node does (~20 us over the part's
#    body). The part's body itself (~28 us: the C entry 11, z's buffer 3, the w split's
#    bookkeeping 3, the rest Python) is the next lead: a C++ launch for parts without a kept w
#    split (tf32x3 files), or fewer Python calls a part.
# 3. The probes' findings left (see the session 54 note): torch.max(x, dim) values' gradient at
#    exact ties (split like amax; torch gives the returned index all), clamp with tensor bounds at
#    ties, logsumexp of a row of -inf / +inf (NaN where torch gives +-inf), max_pool with two NaNs
#    in a window, forward(self, x, *args, **kwargs) refused, partialmethod forward's message.
# 4. From earlier plans: 1024 x 1024 -> 32 (cuBLAS's file 10.5 us against kgen's 13.1); the
#    rule's harmonic at K = 512; the search's cost-model rates; a 16-bit module's kept z in its own
#    dtype; 55's 1e-2 search; issue 24's and 25's H100 goals (an H100 needed).
echo "a plan, not a script: read it"
