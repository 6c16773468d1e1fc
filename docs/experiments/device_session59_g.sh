# Session 59, call G (nvidia-h200-x2): KernelBench's 36 files respelled (call E's corpus) in bf16
# again after the Linear's bias rounding follows the call that adds it (F.linear(x, W) + b rounds
# z first, as eager does); call E had 29 of 36, its control (the files as published at the same
# shape, call F) 36 of 36. GPU 0 also runs test_linear_rounding_gpu.py's new separate-bias case.
. scripts/device_setup.sh
(CUDA_VISIBLE_DEVICES=0 gpu_tests rounding.log 150 tests/test_linear_rounding_gpu.py -k separate_bias > $OUT/rounding.txt 2>&1) &
REFS=.kgen_work/kb_respelled PRECISIONS=bf16 GPUS=2 EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | grep -v "| correct |" | tail -12
wait
cat $OUT/rounding.txt
t done
