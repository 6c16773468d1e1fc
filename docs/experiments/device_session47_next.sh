# What session 46 leaves for the next session's device time (issues 24, 25).
#
# Session 46: the gate's eager yardstick for bf16 / fp16 products is eager on operands rounded to the
# math (check/rounding.py; "medium" is TF32 on CUDA); the 1e-2 searches of 56, 59, 66 now pick
# kgen's GEMM (30 of 36 files); inside torch.autocast an fp32 module's inference leaves its weight
# fp32 for the round16 GEMM (-DKGEN_FP32_WEIGHT; 17-1024 rows, no gradient of the weight wanted):
# the 36 files' median 0.889x -> 0.789x eager autocast (queued 0.734x), the 128-row files 0.58-0.62x.
#
# 0. Not GPU-run at session 46's last commit (its device time was spent):
#    - the 17-row lower limit (AUTOCAST_FP32_WEIGHT_MIN_ROWS): CPU-tested only; the GPU tests that
#      ran (257 rows, KernelBench's 128-2048) are above it;
#    - the whole tests/test_half_gpu.py (call F ran its autocast tests on three modules) and
#      tests/test_native_backward.py, tests/test_custom_ops.py (call F: -k fp32_module_under_autocast);
#      all on the device: gpu_tests x.log 560 tests/test_half_gpu.py tests/test_native_backward.py
# 1. 55's 1e-2 search again (the one-tile CTA; session 45 measured 1.13 ms against cuBLAS BF16's 1.20).
# 2. The round16 CTAs at a few rows on 16-bit x (X = T), to lower AUTOCAST_FP32_WEIGHT_MIN_ROWS:
#    an A/B at 1, 8, 16 rows against the half GEMM's few-row path (s46/autocast_kernels.py with
#    another batch).
# 3. Autocast training with the fp32 weight: the backward's dx GEMM reads W in 16 bits, so the step
#    converts W once either way. A dx GEMM that rounds an fp32 W itself (W as wgmma's B operand,
#    N-major: the round16 GEMM takes w K-major only) would let the step skip the conversion too.
# 4. kgen's forward host time (~0.15 ms a call at KernelBench 12 under autocast, measured as the
#    wall of synchronized calls less the kernels' GPU time, session 46 calls E and F): what the
#    synchronized table shows where the GPU's work is short; a profile of the Python path first.
# 5. Issue 24's H100 goals and issue 25 (an H100 needed): 84/30 <= 0.22 ms in bf16, 39 <= 0.80,
#    the family median <= 0.75x; the bf16 training step; fp32-exact nearer the floor.
echo "a plan, not a script: read it"
