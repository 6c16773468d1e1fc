# Session 15: the new point-wise ops (erfc, atan, floor, ceil, round, trunc) on the GPU: the op
# table's GPU test (each CUDA expression against torch's own fp32 kernel, errors vs fp64), then
# `kgen validate` of docs/experiments/s15/refs/erfc_atan_round.py in fp32 and bf16.
. scripts/device_setup.sh
timeout 200 python3 -m pytest -m gpu -q -s tests/test_ops.py -k accurate > $OUT/ops_gpu.log 2>&1; echo "exit $?"
grep -E "^(erfc|atan|floor|ceil|round|trunc|erf |expm1)|passed|failed|Error" $OUT/ops_gpu.log | head -20
r=docs/experiments/s15/refs/erfc_atan_round.py
python3 -m kgen.cli generate $r -o /tmp/ear.py --force | grep -E "^wrote"
timeout 150 python3 -m kgen.cli validate /tmp/ear.py --ref $r > $OUT/validate_fp32.log 2>&1; echo "exit $?"; tail -22 $OUT/validate_fp32.log
timeout 120 python3 -m kgen.cli validate /tmp/ear.py --ref $r --dtype bf16 --tol 1e-2 > $OUT/validate_bf16.log 2>&1; echo "exit $?"; tail -4 $OUT/validate_bf16.log
t done
