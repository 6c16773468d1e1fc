# Session 11, sixth device call: where the host time of a forward goes before its kernels launch
# (docs/experiments/s11/host_segments.py), kgen's default files of three modules, bf16 and fp32.
# Carry .kb (KernelBench).
. scripts/device_setup.sh
mkdir -p /tmp/seg
for n in 33 84 12; do kgen generate $(ls .kb/level2/${n}_*.py) -o /tmp/seg/k$n.py --force > /dev/null; done
for f in /tmp/seg/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for n in 33 84 12; do for dt in bf16 fp32; do
  t "$n $dt"
  timeout 100 python3 docs/experiments/s11/host_segments.py $(ls .kb/level2/${n}_*.py) /tmp/seg/k$n.py --dtype $dt 2>&1 | tee -a $OUT/segments.log | cut -c1-150
done; done
t done
