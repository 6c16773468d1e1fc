# Session 12, first device call: a 16-bit module's parameters and BatchNorm buffers go to the
# kernels in the module's dtype (no conversion kernels before the launch, no copies back after
# it). Files of the template before and after (s12files/h<NUM>_{a_old,b_new}.py, untracked,
# carried; `kgen generate REF --dtype bf16` at HEAD and with the change) timed interleaved as
# KernelBench times (docs/experiments/s11/host_time.py), per-kernel GPU time of the new files
# (scripts/profile_forward.py), then the 16-bit GPU tests. Carry .kb (KernelBench).
. scripts/device_setup.sh
for f in s12files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
done; wait
for n in 33 84 12 97; do
  t "host time $n bf16"
  timeout 90 python3 docs/experiments/s11/host_time.py $(ls .kb/level2/${n}_*.py) --dtype bf16 s12files/h${n}_*.py 2>&1 | tee $OUT/params_host_$n.log | sed -n '1,4p'
done
t "profile (bf16, no grad)"
timeout 120 python3 scripts/profile_forward.py s12files/h33_b_new.py s12files/h84_b_new.py s12files/h97_b_new.py --dtype bf16 > $OUT/params_profile.log 2>&1; grep -i "total\|==" $OUT/params_profile.log | head -20
t "gpu tests (16-bit)"
timeout ${TESTS_LIMIT:-200} python3 -m pytest -m gpu -q -n 4 tests/test_half_gpu.py > $OUT/params_gpu_tests.log 2>&1; tail -4 $OUT/params_gpu_tests.log
t done
