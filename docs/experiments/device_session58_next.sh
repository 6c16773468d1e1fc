# What session 57 leaves for the next session's device time (issues 24, 25).
#
# Session 57: the K pad in the C entry (kernels/entry.cuh, gemm_k / pad_k; a small fp32 call
# 116-133 -> 41-48 us at 300 x 1337 -> 260 on an H200), the Linear's one rounding after a computed
# bias / addmm's alpha / a scaled input (lower.forward.linear_steps), the input scaled by a number
# before the GEMM (trace.Tracer._input_scaling).
#
# 1. If call D did not run it: gpu_tests x.log 300 tests/test_linear_rounding_gpu.py
# 2. The GPU tier at large after the pad moved into the C entry: tests/test_gpu.py,
#    tests/test_half_gpu.py, tests/test_keep_z_gpu.py in full (sessions 56-57 ran their ragged
#    subsets only), then KernelBench's eval on all 36 at fp32 and bf16
#    (scripts/device_kernelbench.sh PRECISIONS="fp32 bf16") and on the odd shapes
#    (REFS=/tmp/kb_odd after scripts/kernelbench_shapes.py).
# 3. 68 at 300 x 1337 -> 260 in fp32: host 63 us a call against 59's 43 with the same GEMM
#    (call B); s54/host_parts.py piece by piece.
# 4. Issue 24's and 25's H100 goals (only H200s lent in sessions 47-57).
echo "a plan, not a script: read it"
