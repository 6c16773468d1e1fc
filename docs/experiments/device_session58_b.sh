# Session 58, call B (nvidia-h200-x2): what call A's limit cut (test_keep_z_gpu.py's gate on the
# kept z's backward, test_linear_rounding_gpu.py) on GPU 0, KernelBench's eval at bf16 on all 36
# over both GPUs beside it (its correctness is the point; its times share a GPU with the tests),
# then the 36 files at other shapes in fp32 (K off TMA's rows: the C entry's pad) over both GPUs.
. scripts/device_setup.sh
t "gpu tests on GPU 0, KernelBench bf16 on both"
CUDA_VISIBLE_DEVICES=0 gpu_tests rest.log 420 tests/test_keep_z_gpu.py -k "backward_from_the_kept_z" tests/test_linear_rounding_gpu.py > $OUT/rest_summary.txt 2>&1 &
PRECISIONS=bf16 GPUS=2 EVAL_LIMIT=240 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | tail -3
t "odd shapes fp32"
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > $OUT/shapes.txt
REFS=/tmp/kb_odd PRECISIONS=fp32 GPUS=2 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | grep -v correct | tail -8
wait
cat $OUT/rest_summary.txt
t done
