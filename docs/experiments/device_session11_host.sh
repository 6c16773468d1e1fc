# Session 11, fourth device call: the host time of a forward (docs/experiments/s11/host_time.py),
# files of the template before and after the one-launch conversions (s11files/h<NUM>_{a_old,b_new}.py,
# untracked, carried), in bf16 and fp32. Carry .kb (KernelBench).
. scripts/device_setup.sh
t "build"
for f in s11files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for n in 33 84 12; do
  for dt in bf16 fp32; do
    t "host time $n $dt"
    timeout 120 python3 docs/experiments/s11/host_time.py $(ls .kb/level2/${n}_*.py) --dtype $dt s11files/h${n}_*.py > $OUT/host_${n}_$dt.log 2>&1
    head -4 $OUT/host_${n}_$dt.log
  done
done
cat $OUT/host_33_bf16.log | cut -c1-150
t done
