# Session 43, call F: the module's input read after the GEMM (a residual) goes to the kernels as
# it comes, in the parameters' type (fp32 in the build for autocast, where eager adds the fp32 input
# unconverted; call E: 51's output 1.97e-3 from fp64 against eager autocast's 1.64e-5), and the
# KernelBench autocast test holds an fp32 output to its own dtype's step; a file without a 16-bit
# build refuses one by name. The autocast tests again.
source scripts/device_setup.sh
t "kernelbench under autocast"
gpu_tests f_kb_autocast.log 200 -rA tests/test_kernelbench_autocast_gpu.py
grep -A3 "\[51\]" $OUT/f_kb_autocast.log | head -4
t "half autocast, custom ops, native node"
gpu_tests f_half_autocast.log 280 tests/test_half_gpu.py tests/test_custom_ops.py tests/test_native_backward.py -k "autocast or custom_ops or native"
t "end"
