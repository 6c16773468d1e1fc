# Session 13: the full gate (kgen validate: forward, gradients, training, NaN / magnitude checks)
# on files of modules written with this session's new spellings (docs/experiments/s13/refs),
# erf and log1p in the kernels and their backward included. Files: s13cmp/ (kgen generate).
. scripts/device_setup.sh
for f in s13cmp/*.py; do (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s13cmp/gelu_softplus_by_hand_bf16.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
for r in gelu_softplus_by_hand spellings_mix; do
  t "validate $r fp32"
  timeout 120 python3 -m kgen validate s13cmp/$r.py --ref docs/experiments/s13/refs/$r.py 2>&1 | tail -25
done
t "validate gelu_softplus_by_hand bf16"
timeout 120 python3 -m kgen validate s13cmp/gelu_softplus_by_hand_bf16.py --dtype bf16 --ref docs/experiments/s13/refs/gelu_softplus_by_hand.py 2>&1 | tail -25
t done
