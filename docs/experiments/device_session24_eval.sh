# Session 24: a search candidate's evaluation with validate()'s heap frozen during the checks
# (its per-check full collections were 0.8 s of each candidate) and no CPU draw for the randn /
# offset inputs: four shipped files evaluated in one worker process; then the README's main job
# cold; then the planted-fault GPU tests (the gate unchanged).
. scripts/device_setup.sh
files="generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py generated/gemm_scale_bn_b1024_i8192_o8192_tol0.01.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.01.py"
t "builds"
for f in $files; do python3 -m kgen.tune.worker build $f > /dev/null 2>&1 & done; wait
t "evaluations in one worker"
python3 docs/experiments/s24/eval_times.py $files $files 2>&1 | tee $OUT/s24_eval_times.log
t "main job cold"
/usr/bin/time -f "main job cold wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_cold_after.log 2>&1
tail -1 $OUT/s24_mainjob_cold_after.log; grep -E "^\[|eval " $OUT/s24_mainjob_cold_after.log | cut -c1-140
rm -rf $OUT/gen
t "faults"
timeout 200 python3 -m pytest -m gpu -v -rfE --tb=short -n 3 tests/test_faults.py > $OUT/s24_faults.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/s24_faults.log | cut -c1-300 | tail -6
t done
