# Session 26: docs/experiments/s26/probe_gc.py on the README's main job's file (one H100 call, ~1.5 min).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
mkdir -p /tmp/p && python3 -m kgen.cli generate --in 8192 --out 8192 -o /tmp/p/main.py > /dev/null 2>&1
timeout 120 python3 docs/experiments/s26/probe_gc.py /tmp/p/main.py 2>&1 | tee $OUT/s26_probe_gc.log | cut -c1-200
