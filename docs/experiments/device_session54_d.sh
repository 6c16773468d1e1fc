# Session 54, call D: the submodule check (908633e) under torch.compile fullgraph and CUDA graphs
# (test_custom_ops -m gpu), kgen validate on two modules with it, and KernelBench's eval at fp32 on
# three of its files (the C++ node and the check in the eval's training-mode forward).
source scripts/device_setup.sh
mkdir -p $OUT
t build
build_files ab/h3 builds.log
gpu_tests gpu_custom_ops.log 200 tests/test_custom_ops.py
for r in small_mlp two_layer_head; do
  timeout 100 python3 -m kgen validate ab/h3/${r}_fp32.py > $OUT/validate_$r.log 2>&1; echo "validate $r: $?"; tail -1 $OUT/validate_$r.log
done
NUMS="12 33 76" PRECISIONS=fp32 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | tail -8
t done
