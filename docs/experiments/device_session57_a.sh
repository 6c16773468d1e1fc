# Session 57, call A: session 56's CPU-only work on the GPU.
# 1. the fp32 K pad as torch.constant_pad_nd: call F's profile again (68, 59 at 300 x 1337 -> 260);
# 2. the ragged-K, output-view and output-dtype GPU tests (tests/test_output_tail_gpu.py unrun);
# 3. kgen validate of user-style modules with a masked assignment, isnan, a computed F.linear bias
#    and a view of the output (docs/experiments/s57/*_ref.py), in fp32 and bf16.
. scripts/device_setup.sh
t profile; bash docs/experiments/device_session56_f.sh 2>&1 | grep -v "^---" | tail -20
t tests; gpu_tests tests.log 330 tests/test_output_tail_gpu.py tests/test_gpu.py tests/test_keep_z_gpu.py tests/test_half_gpu.py -k "ragged or view or output"
mkdir -p /tmp/v
for r in masked_ref flinear_bias_ref; do
  kgen generate docs/experiments/s57/$r.py -o /tmp/v/$r.py --force > /dev/null
done
t validate
for r in masked_ref flinear_bias_ref; do
  for d in fp32 bf16; do
    echo "== $r $d"; timeout 120 kgen validate /tmp/v/$r.py --dtype $d 2>&1 | tail -6
  done
done 2>&1 | tee $OUT/validate.log
t done
