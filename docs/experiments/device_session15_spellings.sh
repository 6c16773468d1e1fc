# Session 15, issue 21: sign, lerp and forward parameters left at their defaults on the GPU.
# `kgen generate` of docs/experiments/s15/refs/*.py, then `kgen validate` (the full gate) of
# each in fp32 (tol 1e-4) and, for sign_lerp, in bf16 (tol 1e-2).
. scripts/device_setup.sh
mkdir -p /tmp/s15
for r in docs/experiments/s15/refs/*.py; do
  n=$(basename $r .py)
  python3 -m kgen.cli generate $r -o /tmp/s15/$n.py --force | grep -E "^wrote"
  (python3 -m kgen.tune.worker build /tmp/s15/$n.py > /tmp/s15/build_$n.log 2>&1 || tail -20 /tmp/s15/build_$n.log) &
done; wait
t "built"
for r in docs/experiments/s15/refs/*.py; do
  n=$(basename $r .py)
  t "validate $n fp32"
  timeout 150 python3 -m kgen.cli validate /tmp/s15/$n.py --ref $r > $OUT/validate_${n}_fp32.log 2>&1; echo "exit $?"; tail -22 $OUT/validate_${n}_fp32.log
done
t "validate sign_lerp bf16"
timeout 150 python3 -m kgen.cli validate /tmp/s15/sign_lerp.py --ref docs/experiments/s15/refs/sign_lerp.py --dtype bf16 --tol 1e-2 > $OUT/validate_sign_lerp_bf16.log 2>&1; echo "exit $?"; tail -22 $OUT/validate_sign_lerp_bf16.log
t done
