# Session 50, call F: why 39's split pass of x (16384 x 4096) runs ~13 us slower in session 50's
# kernel than in session 49's (calls C-E): the two kernels side by side on x alone
# (s50/split_bench.cu, written before the call by `python3 docs/experiments/s50/split_bench.py
# 34ca91c 3bd617c > docs/experiments/s50/split_bench.cu`: the device's copy of the tree has no git
# history), and a variant without the held row's padding branch. Then the fp16x3
# split-K tests again (call E's failed on the workspace's size: w's split left it).
source scripts/device_setup.sh
t "split bench"
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a docs/experiments/s50/split_bench.cu -o /tmp/split_bench && /tmp/split_bench | tee $OUT/f_split_bench.md
t "tests"
gpu_tests f_gpu_split_k.log 200 tests/test_split_k_gpu.py -k fp16x3
t "end"
