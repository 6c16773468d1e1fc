# Session 55, call B, at f89a4b5 (the DeviceContext, logsumexp, dynamic-shape, torch.func and rows commits): KernelBench's
# eval of 12 (fp32 and bf16) as KernelBench runs it and under a harness's default device, 100
# timed trials each, to see the forward keep its usual path under torch's device context; GPU
# tests of logsumexp's infinite rows, the custom ops (compile, CUDA graphs: _kgen_traced changed)
# and a (batch, features) file on a (2, 5, features) input.
source scripts/device_setup.sh
mkdir -p $OUT
export PYTHONPATH=$PYTHONPATH:.kb/src
t "builds"
(for f in ab/kb/12_Gemm_Multiply_LeakyReLU.py; do python3 -m kgen.tune.worker build --dtype fp32 $f >/dev/null 2>&1 || echo "fp32 build failed"; python3 -m kgen.tune.worker build --dtype bf16 $f >/dev/null 2>&1 || echo "bf16 build failed"; done) &
gpu_tests tests.log 300 tests/test_infinite_rows_gpu.py tests/test_custom_ops.py tests/test_rows_input_gpu.py -k 'batch_features or infinity or not rows'
wait
t "KernelBench eval of 12 under harness defaults"
sed -i 's/num_perf_trials=20/num_perf_trials=100/' docs/experiments/s55/harness_variants.py
for p in fp32 bf16; do for mode in plain default_device device_ctx; do
  timeout 60 python3 docs/experiments/s55/harness_variants.py $mode .kb/level2/12_Gemm_Multiply_LeakyReLU.py ab/kb/12_Gemm_Multiply_LeakyReLU.py $p 2>&1 | tail -1 | cut -c1-400
done; done | tee $OUT/harness.log
t "done"
