# Session 24: the README's main job cold with the search's evaluation worker started (and warmed
# up: worker.warm_up) while the candidates build, then rerun.
. scripts/device_setup.sh
t "main job cold"
/usr/bin/time -f "main job cold wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_cold_warm_worker.log 2>&1
tail -1 $OUT/s24_mainjob_cold_warm_worker.log; grep -E "^\[|eval |build \[1/" $OUT/s24_mainjob_cold_warm_worker.log | cut -c1-140
t "main job rerun"
/usr/bin/time -f "main job rerun wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_rerun_warm_worker.log 2>&1
tail -1 $OUT/s24_mainjob_rerun_warm_worker.log
rm -rf $OUT/gen
t done
