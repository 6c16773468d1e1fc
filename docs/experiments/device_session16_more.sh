# Session 16: the smooth new ops and the steps apart (docs/experiments/s16/refs/trig_pow.py,
# mod_round.py: trig_mod.py of the first run stacked so many steps and kinks that the gate's
# jump mask gave up, KINK_MAX_FRACTION), each `kgen validate`d in fp32 and bf16.
. scripts/device_setup.sh
mkdir -p /tmp/s16b
for n in trig_pow mod_round; do
  python3 -m kgen.cli generate docs/experiments/s16/refs/$n.py -o /tmp/s16b/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s16b/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s16b/$n.py > /dev/null 2>&1) &
done; wait
for n in trig_pow mod_round; do
  for d in fp32 bf16; do
    tol=$([ $d = fp32 ] && echo 1e-4 || echo 1e-2)
    t "validate $n $d"
    timeout 60 python3 -m kgen.cli validate /tmp/s16b/$n.py --ref docs/experiments/s16/refs/$n.py --dtype $d --tol $tol > $OUT/validate_${n}_$d.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_${n}_$d.log | tail -3
  done
done
t done
