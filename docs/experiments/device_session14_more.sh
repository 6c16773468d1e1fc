# Session 14, second batch of spellings: pooling by hand over a (batch, P, k) view, clamp with a
# parameter as its bounds, masked_fill, addcmul (s14/refs/pool_by_hand.py); the GEMM as
# torch.einsum, a bias indexed with None, F.normalize with p=1 (s14/refs/einsum_normalize.py).
# The full gate in fp32 and bf16 on the files kgen generate wrote (s14files/).
. scripts/device_setup.sh
for f in s14files/pool_by_hand.py s14files/einsum_normalize.py; do
  (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") &
  (timeout 300 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed bf16: $f") &
done
wait
for r in pool_by_hand einsum_normalize; do
  for d in fp32 bf16; do
    t "validate $r $d"
    timeout 150 python3 -m kgen validate s14files/$r.py --dtype $d --ref docs/experiments/s14/refs/$r.py 2>&1 | tail -20
  done
done
t done
