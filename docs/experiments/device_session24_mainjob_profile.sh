# Session 24: where the README's main job spends its time (issue 25, item 3): one candidate's
# evaluation in the search's worker (cProfile, build cached), the main job cold, then rerun
# under cProfile. Profiles and logs to $OUT.
. scripts/device_setup.sh
f=generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py
t "worker build"
/usr/bin/time -f "build wall %e s" python3 -m kgen.tune.worker build $f 2>&1 | tail -1
t "worker evaluate (profiled)"
/usr/bin/time -f "evaluate wall %e s" KGEN_WORKER_TEARDOWN=1 python3 -m cProfile -o $OUT/s24_evaluate.prof -m kgen.tune.worker evaluate --tol 1e-4 $f 2>&1 | cut -c1-300 | tail -2
t "main job cold"
/usr/bin/time -f "main job cold wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_cold.log 2>&1
tail -1 $OUT/s24_mainjob_cold.log; grep -E "^\[" $OUT/s24_mainjob_cold.log | cut -c1-140
t "main job rerun (profiled)"
/usr/bin/time -f "main job rerun wall %e s" python3 -m cProfile -o $OUT/s24_rerun.prof -m kgen.cli search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_rerun.log 2>&1
tail -1 $OUT/s24_mainjob_rerun.log; grep -E "^\[" $OUT/s24_mainjob_rerun.log | cut -c1-140
rm -rf $OUT/gen
t done
