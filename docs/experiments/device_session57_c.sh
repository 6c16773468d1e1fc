# Session 57, call C: the pad kernel with a CTA per row (c2_; call B's grid-stride form, c1_, took
# 6 us of 19-28 us of kernels at 300 x 1337 -> 260), the Linear's output rounded once after a
# computed bias (forward.linear_output; call B: flinear_bias_ref in bf16 at 2-4x eager's error,
# KernelBench's eval failed in 1 of 5 trials), and the ragged-K GPU tests on the new pad.
. scripts/device_setup.sh
t build; build_files .kgen_work/ab57 build.log
t ab
for f in .kgen_work/ab57/*.py; do
  d=$(case $f in *fp32*) echo fp32;; *) echo bf16;; esac)
  echo "== $(basename $f) $d"
  timeout 60 python3 docs/experiments/s55/default_device_ab.py $f plain $d 2>&1 | grep "^plain new"
  timeout 60 python3 scripts/profile_forward.py $f $([ $d = fp32 ] || echo --dtype bf16) --iters 50 2>&1 | grep -E "^==|ms  " | head -4
done 2>&1 | cut -c1-150 | tee $OUT/ab.log
t validate
mkdir -p /tmp/v
for r in flinear_bias_ref; do
  kgen generate docs/experiments/s57/$r.py -o /tmp/v/$r.py --force > /dev/null
  for d in bf16 fp32; do
    echo "== $r $d"; timeout 120 kgen validate /tmp/v/$r.py --dtype $d 2>&1 | grep -vE "^PASS  (static|seeded|clear)"
  done
done 2>&1 | cut -c1-220 | tee $OUT/validate.log | grep -E "^==|FAIL|passed"
t tests; gpu_tests tests.log 240 tests/test_gpu.py tests/test_keep_z_gpu.py tests/test_half_gpu.py -k ragged
t done
