# Session 26, last call (H100, ~1.5 min): the worker's evaluation and full validation with the
# thaw right before validate() (validate.thaw), gc timed apart from the GPU's work.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
mkdir -p /tmp/p && python3 -m kgen.cli generate --in 8192 --out 8192 -o /tmp/p/main.py > /dev/null 2>&1
timeout 100 python3 - <<'PY' 2>&1 | grep -E "^(evaluate|full|freeze)"
import gc, sys, time
sys.path.insert(0, "docs/experiments/s26")
import profile_eval as pe   # (gc.collect timed apart from the GPU work it may wait for)
from kgen.tune import worker
worker.warm_up(); worker.build("/tmp/p/main.py")
print("freeze count after warm-up and build:", gc.get_freeze_count())
for i in range(3):
    t0 = time.perf_counter(); r = worker.evaluate_one("/tmp/p/main.py", [1e-4], None, 30)
    print(f"evaluate_one #{i + 1}: {time.perf_counter() - t0:.2f} s, {r['status']}; gc {pe.GC_STATS}")
    pe.GC_STATS.update(calls=0, sync_s=0.0, collect_s=0.0, collected=0)
t0 = time.perf_counter(); r = worker.full_validation("/tmp/p/main.py", 1e-4, None)
print(f"full_validation: {time.perf_counter() - t0:.2f} s, {r}; gc {pe.GC_STATS}")
PY
