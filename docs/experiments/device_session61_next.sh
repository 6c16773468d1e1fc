# What session 60 leaves for the next session's device time (issues 24, 25).
#
# Session 60 ran on one H200 (calls A-F): KernelBench's files respelled in bf16, 36 of 36 after
# bc77bfe (session 59: 29); KernelBench's eval on all 36 as published at fp16 and bf16, 36 of 36
# each (at once on one GPU: timings beside each other's); test_half_gpu.py and
# test_linear_rounding_gpu.py in full (222 passed); kgen validate 18 of 18 on every session-60
# module (stateless modules in forward, an in-place upcast, (W @ x.T).T fp32 / bf16, an fp16
# var / normalize / rms_norm past fp16's range with a remainder, a LayerScale on a 3-d input fp32 /
# bf16); the gemv rewrite through an upcast (0.262x eager, refused by KernelBench's replay as 14's).
# The review's mends after call C (a transposed activation as a view, the gemv filter, the
# gradients check's in-place error only, helper modules per folder) are trace-level and CPU-tested.
#
# Left for the GPU:
# 1. Issue 24's and 25's H100 goals (no H100 lent in sessions 47-60): KernelBench's eval at bf16 and
#    fp16 on all 36 alone (not at once), ratios against eager and max-autotune; 84 / 30 <= 0.22 ms;
#    39 <= 0.80 ms; KB 12 1e-2 tier <= 0.30 ms; the bf16 training step <= 0.75x eager; issue 25's
#    fp32-exact table and every-batch files.
# 2. KernelBench's eval at fp16 alone on an idle GPU (call C ran it beside bf16; call F ran bf16
#    alone: 36 of 36, 0.961x by KernelBench's timing).
# 3. The trace-level changes after call C (the review's mends, the respell merge's unbound Tensor
#    methods, the guard of nested settings) are CPU-tested; a kgen validate of a module of each
#    would confirm the emitted files on the GPU.
echo "a plan, not a script: read it"
