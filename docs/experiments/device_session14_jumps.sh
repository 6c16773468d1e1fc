# Session 14: after the forward checks learned to leave out output elements at a jump of the
# reference (kinks.jump_mask, where the reference has a torch.where): the activation mix again
# (threshold and hardshrink jump), and the planted-fault GPU tests (the gate still rejects every
# fault, and passes the unmodified files).
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/activations_mix.py > /dev/null 2>&1 || echo "build failed") &
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s14files/activations_mix.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
for i in 1; do
  t "validate activations_mix fp32, run $i"
  timeout 150 python3 -m kgen validate s14files/activations_mix.py --ref docs/experiments/s14/refs/activations_mix.py 2>&1 | tail -20
done
t "validate activations_mix bf16"
timeout 150 python3 -m kgen validate s14files/activations_mix.py --dtype bf16 --ref docs/experiments/s14/refs/activations_mix.py 2>&1 | tail -20
t "planted faults"
timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_faults.py tests/test_validate.py 2>&1 | tail -5
t done
