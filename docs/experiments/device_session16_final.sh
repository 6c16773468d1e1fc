# Session 16, third run: `kgen validate` in fp32 of rms_logical_kinks.py (rms_logical.py made
# continuous at its band's edges: kinks, no jumps, which the training check cannot judge) and
# of mod_round.py (the jump mask's finer probe, kinks.JUMP_PROBE).
. scripts/device_setup.sh
mkdir -p /tmp/s16c
for n in rms_logical_kinks mod_round; do
  python3 -m kgen.cli generate docs/experiments/s16/refs/$n.py -o /tmp/s16c/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s16c/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s16c/$n.py > /dev/null 2>&1) &
done; wait
for run in "rms_logical_kinks fp32 1e-4" "mod_round fp32 1e-4"; do
  set -- $run
  t "validate $1 $2"
  timeout 60 python3 -m kgen.cli validate /tmp/s16c/$1.py --ref docs/experiments/s16/refs/$1.py --dtype $2 --tol $3 > $OUT/validate_$1_$2.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_$1_$2.log | tail -3
done
t done
