# Session 24: the README's main job on the device with Python's bytecode kept, as a default
# installation keeps it (the device image sets PYTHONDONTWRITEBYTECODE=1, so every process there
# compiles torch's, sympy's and matplotlib's sources afresh: ~5.5 s a process). The image's
# packages compiled once first (compileall), then the main job cold (kgen's caches and torch's
# extension cache empty) and rerun.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
python3 -c "import kgen.cli, kgen.tune.worker, kgen.check.validate" 
t "main job cold"
/usr/bin/time -f "main job cold wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_cold_bytecode.log 2>&1
tail -1 $OUT/s24_mainjob_cold_bytecode.log; grep -E "^\[|build \[(1|10)/" $OUT/s24_mainjob_cold_bytecode.log | cut -c1-120
for i in 1 2; do
t "main job rerun $i"
/usr/bin/time -f "main job rerun wall %e s" kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --out-dir $OUT/gen > $OUT/s24_mainjob_rerun_bytecode_$i.log 2>&1
tail -1 $OUT/s24_mainjob_rerun_bytecode_$i.log
done
rm -rf $OUT/gen
t done
