# Session 13: the full gate on a PReLU module's files (docs/experiments/s13/refs/prelu.py), fp32 and bf16.
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s13cmp/prelu.py > /dev/null 2>&1 || echo "build failed") &
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s13cmp/prelu_bf16.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
timeout 120 python3 -m kgen validate s13cmp/prelu.py --ref docs/experiments/s13/refs/prelu.py 2>&1 | tail -20
timeout 120 python3 -m kgen validate s13cmp/prelu_bf16.py --dtype bf16 --ref docs/experiments/s13/refs/prelu.py 2>&1 | tail -20
