# Session 61, call B (nvidia-h200): the GPU tests of session 61's merges, 8 pytest workers on the one
# GPU (correctness, not timing): GLU / SwiGLU / GEGLU halves (tests/test_glu_gpu.py), inputs after
# the first (tests/test_second_input_gpu.py), the views / pooling / InstanceNorm / RReLU spellings
# (tests/test_spellings_probe61_views_gpu.py), the 16-bit semantics (comparisons with a number, a
# sum of everything rounded once, addmm's alpha / beta: tests/test_half_semantics_gpu.py), and the
# output path the last touched (tests/test_output_tail_gpu.py).
. scripts/device_setup.sh
gpu_tests new.log 540 -n 8 tests/test_glu_gpu.py tests/test_second_input_gpu.py tests/test_spellings_probe61_views_gpu.py \
  tests/test_half_semantics_gpu.py tests/test_output_tail_gpu.py
t done
