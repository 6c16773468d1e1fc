# Session 55, call C, at c817320: the usage probe's round 2 (compile controls, kink diagnosis, every
# case in its deadline), and KernelBench's eval of 12 in bf16 under a harness's default device
# after 877b6dc (the forward's body with torch function modes off under torch's device context).
source scripts/device_setup.sh
mkdir -p $OUT
(python3 -m kgen.tune.worker build --dtype fp32 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "fp32 build failed"
 python3 -m kgen.tune.worker build --dtype bf16 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "bf16 build failed") &
USAGE_DEADLINE=330 timeout 390 bash docs/experiments/device_session55_usage.sh 2>&1 | tail -c 8000
wait
t "KernelBench eval of 12 under harness defaults"
export PYTHONPATH=$PYTHONPATH:.kb/src
sed -i 's/num_perf_trials=20/num_perf_trials=100/' docs/experiments/s55/harness_variants.py
for p in bf16 fp32; do for mode in plain default_device device_ctx; do
  timeout 60 python3 docs/experiments/s55/harness_variants.py $mode .kb/level2/12_Gemm_Multiply_LeakyReLU.py ab/kb/12_Gemm_Multiply_LeakyReLU.py $p 2>&1 | tail -1 | cut -c1-200
done; done | tee $OUT/harness.log
t "done"
