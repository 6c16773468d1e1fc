# Session 14, after 16bbfd5: the F.batch_norm module's file through the full gate again, fp32 and
# bf16 (the momentum=None check now said not run for a functional BatchNorm).
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/functional_batch_norm.py > /dev/null 2>&1 || echo "build failed") &
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s14files/functional_batch_norm.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
for d in fp32 bf16; do
  t "validate functional_batch_norm $d"
  timeout 200 python3 -m kgen validate s14files/functional_batch_norm.py --dtype $d --ref docs/experiments/s14/refs/functional_batch_norm.py 2>&1 | tail -22
done
t done
