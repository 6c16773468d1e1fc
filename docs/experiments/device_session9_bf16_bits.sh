# Session 9 (H100): kgen's bf16 GEMM against cuBLAS's, bit for bit (docs/experiments/s9/).
. scripts/device_setup.sh >/dev/null
W=/tmp/s9; mkdir -p $W
for b in True False; do
  python3 -m kgen.cli generate docs/experiments/s9/linear_relu_bias$b.py --dtype bf16 -o $W/lr_$b.py > $W/gen_$b.log 2>&1 || cat $W/gen_$b.log
done
t "bits"
timeout 200 python3 docs/experiments/s9/bf16_gemm_bits.py $W/lr_True.py $W/lr_False.py 2>&1 | tee $OUT/bf16_bits.log | cut -c1-600
t done
