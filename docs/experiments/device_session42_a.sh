# Session 42, call A: an fp32 module inside torch.autocast. (1) eager's output dtype there against
# kgen's reading of the IR, on every module of tests/refs, KernelBench's files and the style
# spellings (no kernels built); (2) the emitted files of tests/refs under autocast: output and
# gradients against fp64 with eager autocast's error as the yardstick, and the 16-bit module's
# case (test_half_gpu.py -k autocast; its fixture builds fp32, bf16 and fp16 of each ref).
source scripts/device_setup.sh
t "dtype rule"
gpu_tests a_autocast_dtype.log 170 tests/test_autocast_dtype_gpu.py
t "half autocast"
gpu_tests a_half_autocast.log 330 tests/test_half_gpu.py -k autocast
t "end"
