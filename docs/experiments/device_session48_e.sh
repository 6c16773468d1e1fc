# Session 48, call E: the trimmed launch's BatchNorm paths in 16 bits (the buffers read once, the
# autocast build's fp32 copies stored back through _kgen_store_running_stats' loop): test_half_gpu's
# BatchNorm references (forward and buffers, gradients, under autocast), then KernelBench's
# BatchNorm files training under autocast.
source scripts/device_setup.sh
t "tests"
gpu_tests e_gpu_half_bn.log 230 tests/test_half_gpu.py -k "bn and (forward_and_buffers or under_autocast or gradients)"
left=$(( 330 - ($(date +%s) - start) ))
gpu_tests e_gpu_kb_autocast_bn.log $left tests/test_kernelbench_autocast_gpu.py -k "33 or 39 or 41 or 84 or 97"
t "end"
