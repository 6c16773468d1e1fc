# Session 50, call B: call A's hash (murmur terms and their squares) made the kept split's pass
# compute-bound (w unchanged: 145 -> 116 us where reading w alone should take ~60; w changed:
# 145 -> 191). s50/hash_bench.cu times cheaper row hashes against a read alone. Then the GPU tests
# session 49 left unrun on its last commits (3d64e71, 027d3b1: the point-wise part's builds, the
# scalar path of tile_store_keeping_z) and the gate on the tail backward.
source scripts/device_setup.sh
t "hash bench"
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a docs/experiments/s50/hash_bench.cu -o /tmp/hash_bench && /tmp/hash_bench | tee $OUT/b_hash_bench.md
t "tests"
gpu_tests b_gpu_half.log 150 tests/test_half_gpu.py -k "gradients or autocast"
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests b_gpu_s49.log $left tests/test_tail_backward.py tests/test_keep_z_gpu.py
t "end"
