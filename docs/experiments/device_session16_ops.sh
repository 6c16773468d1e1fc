# Session 16, last run: the op table's GPU test (every op's CUDA expression against torch's own
# fp32 kernel and fp64, specials included: this session's sin, cos, tan, sinh, cosh, fmod,
# remainder, round with decimals, rpow, pow_tensor, fmax, fmin), then `kgen validate` of
# docs/experiments/s16/refs/powers_fmax.py in fp32 and bf16.
. scripts/device_setup.sh
timeout 200 python3 -m pytest -m gpu -q -s tests/test_ops.py -k accurate > $OUT/ops_gpu.log 2>&1; echo "exit $?"
grep -E "^(sin|cos|tan|sinh|cosh|fmod|remainder|round|rpow|pow_tensor|fmax|fmin)|passed|failed|Error" $OUT/ops_gpu.log | head -30
python3 -m kgen.cli generate docs/experiments/s16/refs/powers_fmax.py -o /tmp/pf.py --force | grep -E "^wrote|kgen:"
for d in fp32 bf16; do
  tol=$([ $d = fp32 ] && echo 1e-4 || echo 1e-2)
  t "validate powers_fmax $d"
  timeout 90 python3 -m kgen.cli validate /tmp/pf.py --ref docs/experiments/s16/refs/powers_fmax.py --dtype $d --tol $tol > $OUT/validate_powers_fmax_$d.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_powers_fmax_$d.log | tail -3
done
t done
