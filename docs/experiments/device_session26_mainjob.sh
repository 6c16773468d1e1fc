# Session 26, last H100 call (~3 min): the README's main job cold and rerun after the worker's
# thaw (a5d52c8), and the warm worker's evaluation profiled again with gc timed apart.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
t "main job cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[" $OUT/main_job_cold.log | cut -c1-160
tail -4 $OUT/bench_headline.log
t "profile: the worker's loop as the search runs it"
mkdir -p /tmp/p && python3 -m kgen.cli generate --in 8192 --out 8192 -o /tmp/p/main.py > /dev/null 2>&1
timeout 100 python3 - <<'PY' 2>&1 | tail -12
import gc, io, sys, time, json
sys.argv = ["x"]
sys.path.insert(0, "docs/experiments/s26")
import profile_eval as pe   # (gc.collect timed apart from the GPU work it may wait for)
from kgen.tune import worker
worker.warm_up(); worker.build("/tmp/p/main.py")
print("freeze count after warm-up and build:", gc.get_freeze_count())
for i in range(3):
    gc.unfreeze()   # (what worker.main now does before each candidate)
    t0 = time.perf_counter(); worker.evaluate_one("/tmp/p/main.py", [1e-4], None, 30)
    print(f"evaluate_one #{i + 1}: {time.perf_counter() - t0:.2f} s; gc {pe.GC_STATS}"); pe.GC_STATS.update(calls=0, sync_s=0.0, collect_s=0.0, collected=0)
gc.unfreeze()
t0 = time.perf_counter(); r = worker.full_validation("/tmp/p/main.py", 1e-4, None)
print(f"full_validation: {time.perf_counter() - t0:.2f} s, {r}; gc {pe.GC_STATS}")
PY
t done
