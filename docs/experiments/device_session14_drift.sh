# Session 14: the training check with kinks no mask takes out (ReLU before a row op) judged
# against the larger drift of two eager runs, one with its input moved by a rounding: the by-hand
# module's file (s14/refs/by_hand.py) through the full gate, and the planted-fault GPU tests (a
# forward and a backward fault still fail the training check; the unmodified files pass).
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/by_hand.py > /dev/null 2>&1 || echo "build failed") &
wait
t "validate by_hand fp32"
timeout 200 python3 -m kgen validate s14files/by_hand.py --ref docs/experiments/s14/refs/by_hand.py 2>&1 | tail -20
t "planted faults, validate's GPU tests"
timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_faults.py tests/test_validate.py 2>&1 | tail -4
t done
