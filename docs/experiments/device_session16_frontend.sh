# Session 16, issue 21: this session's frontend on the GPU. The op table's GPU test (sin, cos,
# tan, sinh, cosh, fmod, remainder, round with decimals, rpow against torch's fp32 kernels and
# fp64), the custom-op / 16-bit / constant GPU tests (the emitted file's names are now _kgen_*),
# then `kgen validate` (the full gate) of each docs/experiments/s16/refs/*.py in fp32, trig_mod
# and kn_scale_leaky in bf16 too, and the (K, N)-weight file against the (N, K) one, each against
# its own eager (scripts/compare_forward.py).
. scripts/device_setup.sh
t "gpu tests"
timeout 240 python3 -m pytest -m gpu -q -x tests/test_ops.py tests/test_custom_ops.py tests/test_half_gpu.py tests/test_constant_gpu.py > $OUT/gpu_tests.log 2>&1; echo "exit $?"; tail -5 $OUT/gpu_tests.log
grep -E "^(sin|cos|tan|sinh|cosh|fmod|remainder|round|rpow)" $OUT/gpu_tests.log | head -20
mkdir -p /tmp/s16
for r in docs/experiments/s16/refs/*.py; do
  n=$(basename $r .py)
  python3 -m kgen.cli generate $r -o /tmp/s16/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s16/$n.py > /tmp/s16/build_$n.log 2>&1 || tail -20 /tmp/s16/build_$n.log) &
done; wait
t "built"
for r in docs/experiments/s16/refs/*.py; do
  n=$(basename $r .py)
  [ $n = nk_scale_leaky ] && continue   # (nn.Linear's layout: only its speed is compared below)
  t "validate $n fp32"
  timeout 100 python3 -m kgen.cli validate /tmp/s16/$n.py --ref $r > $OUT/validate_${n}_fp32.log 2>&1; echo "exit $?"; grep -E "passed|FAIL|checks" $OUT/validate_${n}_fp32.log | tail -4
done
for n in trig_mod kn_scale_leaky; do
  t "validate $n bf16"
  timeout 80 python3 -m kgen.cli validate /tmp/s16/$n.py --ref docs/experiments/s16/refs/$n.py --dtype bf16 --tol 1e-2 > $OUT/validate_${n}_bf16.log 2>&1; echo "exit $?"; grep -E "passed|FAIL|checks" $OUT/validate_${n}_bf16.log | tail -3
done
t "compare (K, N) and (N, K) weights"
timeout 90 python3 scripts/compare_forward.py docs/experiments/s16/refs/kn_scale_leaky.py /tmp/s16/kn_scale_leaky.py > $OUT/compare_kn.log 2>&1; tail -6 $OUT/compare_kn.log
timeout 90 python3 scripts/compare_forward.py docs/experiments/s16/refs/nk_scale_leaky.py /tmp/s16/nk_scale_leaky.py > $OUT/compare_nk.log 2>&1; tail -6 $OUT/compare_nk.log
t done
