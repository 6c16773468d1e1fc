# What session 58 leaves for the next session's device time (issues 24, 25).
#
# Session 58 ran the GPU tier in full (317 passed), KernelBench's eval on all 36 (fp32 35, bf16
# 36) and at odd shapes (fp32 34), the C++ node as a Node of its own (a training-mode forward
# 14-25 us less host time; its tiers 95 passed), probe 58's spellings (autocast 222 passed,
# kgen validate 18 of 18 on two modules in fp32 and bf16). Left for the GPU:
#
# 1. Commits after call E (CPU-checked only; git log 716550b..): the new ops' accuracy on the GPU
#    (tests/test_ops.py's gpu test: logaddexp, logit, frac), kgen validate of a module using them
#    in fp32 and bf16; the float32 facts ((y > 0) * 0.1, torch.where of Python numbers) make such
#    files fp32-only (tests/test_autocast_dtype_gpu.py again); the review's fixes (a number made in
#    a 16-bit dtype rounded, .item() under autocast).
# 2. KernelBench's eval at bf16 on all 36 with the node (scripts/device_kernelbench.sh
#    PRECISIONS=bf16 GPUS=2, alone on its GPUs): KernelBench's timing runs a forward that records
#    autograd, whose host time the node cut; session 58's 1.007 median was taken beside GPU tests.
# 3. The odd shapes in bf16 (REFS=/tmp/kb_odd after scripts/kernelbench_shapes.py): last run in
#    session 56 (30 of 36, the six failures eager's own error beyond 1e-2).
# 4. 68 at 300 x 1337 -> 260 in fp32: its call's host time 20 us above 59's with the same GEMM;
#    docs/experiments/s54/host_parts.py piece by piece.
# 5. Issue 24's and 25's H100 goals (only H200s lent in sessions 47-58).
echo "a plan, not a script: read it"
