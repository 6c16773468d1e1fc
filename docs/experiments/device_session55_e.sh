# Session 55, call E (and F, at b76e050 with the generator change 877b6dc lost): call D's A/B with cProfile of 50 no-grad forwards in each mode.
source scripts/device_setup.sh
mkdir -p $OUT
python3 -m kgen.tune.worker build --dtype bf16 ab/kb/12_Gemm_Multiply_LeakyReLU.py >/dev/null 2>&1 || echo "bf16 build failed"
for mode in plain default; do
  timeout 100 python3 docs/experiments/s55/default_device_ab.py ab/kb/12_Gemm_Multiply_LeakyReLU.py $mode bf16 > $OUT/ab_$mode.log 2>&1
  grep -E "a call" $OUT/ab_$mode.log
  sed -n '/ncalls/,$p' $OUT/ab_$mode.log | head -26 | cut -c1-150
done
