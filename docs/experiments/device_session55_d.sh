# Session 55, call D, at 877b6dc+: where KernelBench 12's file in bf16 loses time under
# torch.set_default_device("cuda") (calls B, C: 0.40-0.46 ms against 0.23-0.28 without).
source scripts/device_setup.sh
mkdir -p $OUT
python3 -m kgen.tune.worker build --dtype bf16 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "bf16 build failed"
for mode in plain default; do
  timeout 100 python3 docs/experiments/s55/default_device_ab.py ab/kb/12_Gemm_Multiply_LeakyReLU.py $mode bf16 > $OUT/ab_$mode.log 2>&1
  grep -E "function modes|traced|a call" $OUT/ab_$mode.log
done
sed -n '/Name/,$p' $OUT/ab_default.log | head -30
