# Session 46, call D: the 16-bit tier's autocast GPU tests on the build whose GEMM reads an fp32
# module's weight in fp32 (test_half_gpu -k autocast: every synthesized module, fp32 in bf16 and
# fp16 autocast, bf16 in bf16; the new test that no conversion of the weight runs), then
# torch.compile / CUDA graphs and the C++ node under autocast.
source scripts/device_setup.sh
t "half autocast"
gpu_tests d_gpu_half_autocast.log 330 tests/test_half_gpu.py -k "autocast"
t "custom ops, native node"
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests d_gpu_ops_native.log $left tests/test_custom_ops.py tests/test_native_backward.py -k "autocast"
t "end"
