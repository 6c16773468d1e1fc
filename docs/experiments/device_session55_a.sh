# Session 55, call A, at 31e833d: GPU checks of session 54's CPU-only commits, and KernelBench's
# eval under harness defaults. (1) kgen validate on a reference that sets torch's default device
# to cuda at import and moves itself in __init__ (d6f665b, 48cc142), and on one building its Linear
# inside `with torch.device("cuda")`; (2) the cuBLAS backend's fp32 training through the C++ node
# (test_cublas_backward_gpu, test_keep_z_gpu's cublas cases); (3) KernelBench's eval on 12, 56, 99
# as KernelBench runs it, under torch.set_default_device("cuda") and under torch.device("cuda"),
# with each run's wall time and peak memory (56 was reported failing at "construct").
source scripts/device_setup.sh
mkdir -p $OUT
t "build"
build_files ab/f builds.log
(for f in ab/kb/*.py; do timeout 300 python3 -m kgen.tune.worker build --dtype fp32 $f > /dev/null 2>&1 || echo "build failed: $f"; done; python3 -m kgen.tune.worker build --dtype bf16 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "bf16 build failed") &
for r in cuda_init devctx; do
  timeout 150 python3 -m kgen validate ab/f/${r}_fp32.py > $OUT/validate_$r.log 2>&1; echo "validate $r: $?"; grep -E "FAIL|passed" $OUT/validate_$r.log | cut -c1-300
done
t "gpu tests"
gpu_tests cublas.log 200 tests/test_cublas_backward_gpu.py "tests/test_keep_z_gpu.py" -k "cublas"
wait
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
