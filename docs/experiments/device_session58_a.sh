# Session 58, call A (nvidia-h200-x2): the GPU tier at large after session 57 moved K's pad into
# the C entry (kernels/entry.cuh, kernels/pad_k.cuh inlined in the wgmma family alone; sessions
# 56-57 ran only the ragged subsets), then KernelBench's eval at fp32 on all 36 files dealt over
# both GPUs.
. scripts/device_setup.sh
t "gpu tiers: test_half_gpu.py on GPU 0; test_gpu.py, test_keep_z_gpu.py, test_linear_rounding_gpu.py on GPU 1"
CUDA_VISIBLE_DEVICES=0 gpu_tests half.log 330 tests/test_half_gpu.py > $OUT/half_summary.txt 2>&1 &
CUDA_VISIBLE_DEVICES=1 gpu_tests fp32.log 330 tests/test_gpu.py tests/test_keep_z_gpu.py tests/test_linear_rounding_gpu.py > $OUT/fp32_summary.txt 2>&1 &
wait
cat $OUT/half_summary.txt $OUT/fp32_summary.txt
t "KernelBench eval fp32, all 36, two GPUs"
PRECISIONS=fp32 GPUS=2 EVAL_LIMIT=240 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | tail -8
t done
