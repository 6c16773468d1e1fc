# Session 17 (H100), after the session's frontend changes (a parametrized Linear, the weight read
# once, torch's last op on the kernel's output): tail_max's full gate in fp32 again (kinks.py:
# a 0-d output at a kink), then the GPU tier's refs (every module of tests/refs, the full gate).
. scripts/device_setup.sh
mkdir -p /tmp/s17f
python3 -m kgen.cli generate docs/experiments/s17/refs/tail_max.py -o /tmp/s17f/tail_max.py --force | grep -E "^wrote|kgen:"
t "validate tail_max fp32"
timeout 80 python3 -m kgen.cli validate /tmp/s17f/tail_max.py --ref docs/experiments/s17/refs/tail_max.py --tol 1e-4 > $OUT/validate_tail_max_fp32.log 2>&1; echo "exit $?"; grep -E "FAIL|passed|training" $OUT/validate_tail_max_fp32.log | tail -3
t refs
timeout ${REFS_LIMIT:-400} python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
echo "exit $?"; tail -4 $OUT/gpu_refs.log
t done
