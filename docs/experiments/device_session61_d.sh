# Session 61, call D (nvidia-h200): call C's two failures again after the batch-1 message's mend
# (tests/test_spellings_probe61_views_gpu.py's lead_bn_transpose gates), and the GPU tests of what
# p61b's 16-bit changes touch beyond call B's (the Linear's steps shared with the oracle, the output
# dtype path in forward.cuh): tests/test_linear_rounding_gpu.py, tests/test_half_gpu.py -k
# forward_and_buffers, tests/test_gemv_half.py; 8 pytest workers on the one GPU.
. scripts/device_setup.sh
gpu_tests d.log 420 -n 8 "tests/test_spellings_probe61_views_gpu.py::test_the_gate" tests/test_linear_rounding_gpu.py \
  tests/test_gemv_half.py "tests/test_half_gpu.py" -k "lead_bn_transpose or rounding or gemv or forward_and_buffers"
t done
