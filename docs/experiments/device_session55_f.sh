# Session 55, call F, at b76e050 (08bbc75 restores the forward's body with function modes off
# under torch's device context): call E's A/B, and KernelBench's eval of 12 in bf16 under each
# harness default.
bash docs/experiments/device_session55_e.sh
source scripts/device_setup.sh > /dev/null
export PYTHONPATH=$PYTHONPATH:.kb/src
sed -i 's/num_perf_trials=20/num_perf_trials=100/' docs/experiments/s55/harness_variants.py
for mode in plain default_device device_ctx plain; do
  timeout 60 python3 docs/experiments/s55/harness_variants.py $mode .kb/level2/12_Gemm_Multiply_LeakyReLU.py ab/kb/12_Gemm_Multiply_LeakyReLU.py bf16 2>&1 | tail -1 | cut -c1-150
done | tee $OUT/harness.log
