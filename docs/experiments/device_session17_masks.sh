# Session 17 (H100): a bool buffer as a condition and as a number (bool_mask_softmax): kgen
# validate (the full gate) in fp32 and bf16; tests/test_where.py on the GPU.
. scripts/device_setup.sh
mkdir -p /tmp/s17m
n=bool_mask_softmax
python3 -m kgen.cli generate docs/experiments/s17/refs/$n.py -o /tmp/s17m/$n.py --force | grep -E "^wrote|kgen:"
(python3 -m kgen.tune.worker build /tmp/s17m/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s17m/$n.py > /dev/null 2>&1) &
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_where.py > $OUT/test_where.log 2>&1 &
wait
echo "test_where: $(tail -1 $OUT/test_where.log)"
for d in "fp32 1e-4" "bf16 1e-2"; do
  set -- $d
  t "validate $n $1"
  timeout 80 python3 -m kgen.cli validate /tmp/s17m/$n.py --ref docs/experiments/s17/refs/$n.py --dtype $1 --tol $2 > $OUT/validate_${n}_$1.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_${n}_$1.log | tail -3
done
t done
