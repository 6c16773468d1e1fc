# Session 14, at the session's last frontend change: the full gate on the by-hand module
# (s14/refs/by_hand.py: x * (x > 0).float(), a LayerNorm from mean and var, a logsumexp by hand,
# x.to(x.device)) in fp32 and bf16, then KernelBench's eval at fp32 on all 36 files
# (scripts/device_kernelbench.sh), to see that nothing the frontend and the gate changed moved them.
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/by_hand.py > /dev/null 2>&1 || echo "build failed") &
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s14files/by_hand.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
for d in fp32 bf16; do
  t "validate by_hand $d"
  timeout 150 python3 -m kgen validate s14files/by_hand.py --dtype $d --ref docs/experiments/s14/refs/by_hand.py 2>&1 | tail -20
done
bash scripts/device_kernelbench.sh
