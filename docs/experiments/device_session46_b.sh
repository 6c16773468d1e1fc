# Session 46, call B: the training check's yardstick for bf16 products (docs/experiments/s46/train_yardstick.py).
source scripts/device_setup.sh
t "yardstick"
mkdir -p /tmp/yd && timeout 400 python3 docs/experiments/s46/train_yardstick.py /tmp/yd > $OUT/b_yardstick.log 2>&1; echo "exit $?"
grep -v "^\s*$" $OUT/b_yardstick.log | tail -20 | cut -c1-400
t "end"
