# Session 14, after d7b2fda (a module that casts to float32 gets a file for fp32 modules only):
# the by-hand module's file in fp32 (the full gate) and in bf16 (refused, naming the cast), and
# the 16-bit GPU tests (tests/test_half_gpu.py: the files that run bf16 / fp16 modules still do).
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/by_hand.py > /dev/null 2>&1 || echo "build failed") &
wait
t "validate by_hand fp32"
timeout 150 python3 -m kgen validate s14files/by_hand.py --ref docs/experiments/s14/refs/by_hand.py 2>&1 | tail -20
t "validate by_hand bf16"
timeout 150 python3 -m kgen validate s14files/by_hand.py --dtype bf16 --ref docs/experiments/s14/refs/by_hand.py 2>&1 | tail -4
t "half gpu tests"
timeout 420 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_half_gpu.py 2>&1 | tail -4
t done
