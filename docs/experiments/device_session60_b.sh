# Session 60, call B (nvidia-h200): the rest of test_half_gpu.py (call A's run was cut at its
# limit after 131 passed, 0 failed), test_gemv_half.py's GPU tier with the upcast case (the
# matrix-vector rewrite through a to_float32), kgen bench of a bf16 `fc(x).float().sum(1)` module
# at 1024 x 8192 -> 8192 as a GEMM file (what session 59's code gave) and as a gemv file (what it
# gives now), and kgen validate of the in-place upcast module again (its reference's own backward
# raises: the gate now says so).
. scripts/device_setup.sh
(for f in float_sum_gemm float_sum_gemv; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1]).build(torch.bfloat16)" .kgen_work/v60/$f.py > /dev/null 2>&1 & done; wait) &
gpu_tests half.log 300 tests/test_half_gpu.py -k "no_multiple_of_8 or refuses or autocast or output_written"
gpu_tests gemv.log 150 tests/test_gemv_half.py
wait
t bench
for f in float_sum_gemm float_sum_gemv; do
  timeout 90 kgen bench .kgen_work/v60/$f.py --dtype bf16 2>&1 | tail -3 | tee $OUT/bench_$f.log
  timeout 90 kgen validate .kgen_work/v60/$f.py --dtype bf16 2>&1 | grep -v "^  " > $OUT/validate_$f.log; tail -1 $OUT/validate_$f.log
done
timeout 100 kgen validate .kgen_work/v60/inplace_upcast.py --dtype bf16 2>&1 | grep -v "^  " > $OUT/validate_inplace_upcast.log
grep -E "gradients|passed" $OUT/validate_inplace_upcast.log | cut -c1-300
t done
