# Session 19: the GPU side of the session's frontend work. tests/test_ops.py's GPU test (every
# point-wise op's CUDA expression against fp64 beside torch's fp32 kernel: floor_divide is new),
# then kgen validate (the full gate) of the files kgen generate writes for the session's modules
# (docs/experiments/s19/refs/: floor division, the same Linear twice, ones_like(x) * c, numpy
# numbers, a weight's shape, an assert on the input's shape), fp32, and bf16 for two of them.
. scripts/device_setup.sh
t "gpu ops test"
timeout 200 python3 -m pytest -m gpu -q tests/test_ops.py -k accurate > $OUT/gpu_ops.log 2>&1; tail -3 $OUT/gpu_ops.log
grep -i "floor_divide" $OUT/gpu_ops.log | head -8
mkdir -p /tmp/s19v
for r in docs/experiments/s19/refs/*.py; do
  kgen generate $r -o /tmp/s19v/$(basename $r) --force > /dev/null || echo "generate failed: $r"
done
t "build"
for f in /tmp/s19v/*.py; do (timeout 200 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done
for f in /tmp/s19v/floordiv_operator.py /tmp/s19v/div_floor_mode.py; do (timeout 200 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") & done; wait
for r in docs/experiments/s19/refs/*.py; do
  n=$(basename $r .py)
  t "validate $n"
  timeout 90 kgen validate /tmp/s19v/$n.py --ref $r > $OUT/validate_$n.log 2>&1; tail -1 $OUT/validate_$n.log
done
for n in floordiv_operator div_floor_mode; do
  t "validate $n bf16"
  timeout 90 kgen validate /tmp/s19v/$n.py --ref docs/experiments/s19/refs/$n.py --dtype bf16 > $OUT/validate_${n}_bf16.log 2>&1; tail -1 $OUT/validate_${n}_bf16.log
done
t done
