# Session 13: where a bf16 training step's host time goes (docs/experiments/s13/host_train.py on
# s13files/t<NUM>_*.py, kgen generate REF --dtype bf16 at two template versions), then the 16-bit
# GPU tests (session 12's last commit, d996c91, was not run on the GPU). Carry .kb.
. scripts/device_setup.sh
for f in s13files/t*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
done; wait
t built
for n in ${NUMS:-33 29 12}; do
  t "host time of a training step, $n bf16"
  timeout 150 python3 docs/experiments/s13/host_train.py $(ls .kb/level2/${n}_*.py) --dtype bf16 s13files/t${n}_*.py > $OUT/host_train_$n.log 2>&1; head -5 $OUT/host_train_$n.log
  if [ -n "$TRAIN16" ]; then timeout 150 python3 docs/experiments/s12/train16.py $(ls .kb/level2/${n}_*.py) s13files/t${n}_*.py 2>&1 | tail -3; fi
done
if [ -n "$GPU_TESTS" ]; then
  t "gpu tests: $GPU_TESTS"
  timeout ${TESTS_LIMIT:-300} python3 -m pytest -m gpu -q -n 4 $GPU_TESTS > $OUT/gpu_tests.log 2>&1; tail -5 $OUT/gpu_tests.log
fi
t done
