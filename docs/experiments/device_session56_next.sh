# What session 55 leaves for the next session's device time (issues 24, 25).
#
# Session 55: a harness's default device (torch.set_default_device, `with torch.device`) no
# longer sends the forward through the op's dispatch and torch's Python mode (KernelBench 12 in
# bf16 0.40-0.46 -> 0.21-0.24 ms there, call F); the usage probe (docs/experiments/s55/
# usage_probe.py, 411 cases of five modules) found and this session fixed torch.compile's
# dynamic shapes (every forward raised), torch.func.grad's message, (B, T, K) inputs; logsumexp's
# rows of -inf / +inf; the wild and CLI probes' fixes (CPU).
#
# 1. CPU-only at the session's end: e9f6397 (one sample, (K,), as its one row: the GPU test
#    tests/test_rows_input_gpu.py::test_a_batch_features_file_on_a_rows_input[one_sample]) and
#    zero_if_inf's CUDA as fabsf(x) == INFINITY (tests/test_infinite_rows_gpu.py passed with
#    isinf in call B). Run: gpu_tests x.log 300 tests/test_rows_input_gpu.py tests/test_infinite_rows_gpu.py
# 2. The usage probe again (bash docs/experiments/device_session55_usage.sh; ~90 s of cases):
#    expect x_1d_* ok on the MLP, LeakyReLU and SiLU files, the rest as call C.
# 3. KernelBench's eval at fp32 and bf16 on all 36 (PRECISIONS="fp32 bf16", two calls or the
#    x2 host with GPUS=2): this session ran 12, 56 and 99 only.
# 4. Open from earlier plans: a forward's host time in training mode at small sizes (~1.5-2x
#    eager's; session 54's host_parts.py); the probes' leftovers (torch.max(x, dim) tie
#    gradients, clamp tensor-bound ties, max_pool two NaNs); issue 24's and 25's H100 goals (an
#    H100 needed; only H200s were lent in sessions 47-55).
echo "a plan, not a script: read it"
