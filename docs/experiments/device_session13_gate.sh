# Session 13: the gate excuses an element where eager overflowed on the way and the candidate has
# the exact (fp64) value within tol; the by-hand GELU / softplus file again, then the planted
# faults (each must still fail, the unmodified files pass).
. scripts/device_setup.sh
timeout 300 python3 -m kgen.tune.worker build s13cmp/gelu_softplus_by_hand.py > /dev/null 2>&1 || echo "build failed"
t "validate gelu_softplus_by_hand fp32"
timeout 120 python3 -m kgen validate s13cmp/gelu_softplus_by_hand.py --ref docs/experiments/s13/refs/gelu_softplus_by_hand.py 2>&1 | tail -20
t "planted faults"
timeout 400 python3 -m pytest -m gpu -q -n 4 tests/test_faults.py 2>&1 | tail -4
t done
