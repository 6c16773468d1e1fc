# Session 55, call A2: call A's KernelBench part again (call A lacked .kb/src on PYTHONPATH).
source scripts/device_setup.sh
mkdir -p $OUT
(for f in ab/kb/*.py; do timeout 300 python3 -m kgen.tune.worker build --dtype fp32 $f > /dev/null 2>&1 || echo "build failed: $f"; done; python3 -m kgen.tune.worker build --dtype bf16 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "bf16 build failed")
t "KernelBench eval under harness defaults"
export PYTHONPATH=$PYTHONPATH:.kb/src
for mode in plain default_device device_ctx; do
  for f in 12_Gemm_Multiply_LeakyReLU 99_Matmul_GELU_Softmax; do
    timeout 120 python3 docs/experiments/s55/harness_variants.py $mode .kb/level2/$f.py ab/kb/$f.py 2>&1 | tail -1 | cut -c1-600
  done
done
timeout 90 python3 docs/experiments/s55/harness_variants.py default_device .kb/level2/12_Gemm_Multiply_LeakyReLU.py ab/kb/12_Gemm_Multiply_LeakyReLU.py bf16 2>&1 | tail -1 | cut -c1-600
t "56"
timeout 200 python3 docs/experiments/s55/harness_variants.py plain .kb/level2/56_Matmul_Sigmoid_Sum.py ab/kb/56_Matmul_Sigmoid_Sum.py 2>&1 | tail -3 | cut -c1-800
t "done"
