# Session 45, call G (the device time left: ~190 s): the GPU tests the review asked for, on the
# reviewed code: the products at 100 rows (the one-tile CTA) in bf16 and fp16, and fp16's gate at
# K % 8 != 0 (the tf32 GEMM of an fp16 variant).
source scripts/device_setup.sh
t "tests"
gpu_tests g_gpu_round16.log 110 tests/test_wgmma_round16_gpu.py -k "products or (fp16 and 2-129-260-36)"
t "end"
