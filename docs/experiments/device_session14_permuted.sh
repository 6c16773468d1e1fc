# Session 14: the training check runs its second eager run for every module with kinks at its
# first step (not only where no mask works): the full gate on max pooling by hand (the probe's
# file that failed it), the by-hand ReLU -> LayerNorm module, and KernelBench 76 (ReLU), after the second run sums in another order (permuted features).
. scripts/device_setup.sh
for f in s14probe/pool_by_view_max.py s14files/by_hand.py s14probe/k76.py; do
  (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") &
done
wait
for f in s14probe/pool_by_view_max.py s14files/by_hand.py s14probe/k76.py; do
  t "validate $f"
  timeout 150 python3 -m kgen validate $f 2>&1 | grep -E "^FAIL|training|gradients, train|passed"
done
t done
