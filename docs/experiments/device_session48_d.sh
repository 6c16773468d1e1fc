# Session 48, call D: KernelBench's eval at bf16 on all 36 files at this code (the host path's
# trim: f8cce8d, e9ba394), and test_gpu.py (every family and math built and validated, training
# and eval) on the trimmed launch. The tests run while the 36 files generate and build (CPU);
# the eval runs alone after them (its timing on an idle GPU).
source scripts/device_setup.sh
t "test_gpu.py, and the 36 files' bf16 builds beside it"
gpu_tests d_gpu_families.log 330 tests/test_gpu.py &
PRECISIONS=bf16 EVAL_LIMIT=1 bash scripts/device_kernelbench.sh > $OUT/d_prebuild.log 2>&1
wait
t "KernelBench's eval at bf16"
PRECISIONS=bf16 EVAL_LIMIT=230 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^NVIDIA\|Successfully" | tail -12
t "end"
