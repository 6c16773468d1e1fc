# Session 17 (H100): nn.Linear under weight_norm / spectral_norm (a parametrized Linear is the
# GEMM of its computed weight, read once per forward): kgen validate (the full gate) of both in
# fp32 and bf16; the where GPU test (KGEN_SPLIT_KEEPS_INFINITIES: only where modules define it
# now); the custom-op tests (torch.compile, CUDA graphs) with the forward's weight read once.
. scripts/device_setup.sh
mkdir -p /tmp/s17p
for n in weight_norm_gelu spectral_norm_tanh; do
  python3 -m kgen.cli generate docs/experiments/s17/refs/$n.py -o /tmp/s17p/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s17p/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s17p/$n.py > /dev/null 2>&1) &
done; wait
for run in "weight_norm_gelu fp32 1e-4" "weight_norm_gelu bf16 1e-2" "spectral_norm_tanh fp32 1e-4" "spectral_norm_tanh bf16 1e-2"; do
  set -- $run
  t "validate $1 $2"
  timeout 80 python3 -m kgen.cli validate /tmp/s17p/$1.py --ref docs/experiments/s17/refs/$1.py --dtype $2 --tol $3 > $OUT/validate_$1_$2.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_$1_$2.log | tail -3
done
t "GPU tests"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_where.py tests/test_custom_ops.py > $OUT/tests.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/tests.log | cut -c1-300 | tail -12
t done
