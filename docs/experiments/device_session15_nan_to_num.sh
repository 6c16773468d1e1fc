# Session 15: torch.nan_to_num on the GPU: `kgen validate` (the full gate, its NaN / Inf inputs
# among the checks) of docs/experiments/s15/refs/nan_to_num_log.py in fp32; in bf16 the file
# says it runs fp32 modules only (nan_to_num's default infinities are the dtype's).
. scripts/device_setup.sh
r=docs/experiments/s15/refs/nan_to_num_log.py
python3 -m kgen.cli generate $r -o /tmp/ntn.py --force | grep -E "^wrote|fp32"
timeout 150 python3 -m kgen.cli validate /tmp/ntn.py --ref $r > $OUT/validate_fp32.log 2>&1; echo "exit $?"; tail -22 $OUT/validate_fp32.log
timeout 100 python3 -m kgen.cli validate /tmp/ntn.py --ref $r --dtype bf16 --tol 1e-2 > $OUT/validate_bf16.log 2>&1; echo "exit $?"; tail -3 $OUT/validate_bf16.log
t done
