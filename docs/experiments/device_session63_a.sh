# Session 63, call A (nvidia-h200), at ad392a2: what session 62 could not run on the GPU after its
# mends: the point-wise prologue's training (KeepZ written out), pside's pre-norm Llama blocks, the
# KernelBench autocast test (.kb carried), the input-gradient buffer's device (second input, rows
# input, the C++ node) and the gemv row-sum rewrite (test_gemv_half, test_eager_sum_gpu,
# test_half_semantics_gpu), 8 pytest workers on the one GPU.
. scripts/device_setup.sh
gpu_tests a.log 520 -n 8 tests/test_prologue_gpu.py tests/test_side_by_side_gpu.py \
  tests/test_kernelbench_autocast_gpu.py tests/test_second_input_gpu.py tests/test_rows_input_gpu.py \
  "tests/test_half_gpu.py::test_the_cpp_node_gives_the_python_nodes_gradients" tests/test_gemv_half.py \
  tests/test_eager_sum_gpu.py tests/test_half_semantics_gpu.py tests/test_gemv_backward.py
t done
