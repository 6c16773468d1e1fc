# Session 60, call D (nvidia-h200): the GPU tests of what the probes' merges touch: the rows'
# output put back at its dimension (test_rows_input_gpu.py, test_output_tail_gpu.py,
# test_input_residual.py), the op table on the GPU (test_ops.py), and the 16-bit forward and
# buffers of every ref (test_half_gpu.py -k forward_and_buffers: var / norm in fp32 inside, the
# divisor of fmod / remainder in the module's dtype).
. scripts/device_setup.sh
gpu_tests rows.log 200 tests/test_rows_input_gpu.py tests/test_output_tail_gpu.py tests/test_input_residual.py tests/test_ops.py
gpu_tests half.log 240 tests/test_half_gpu.py -k forward_and_buffers
t done
