# Session 27, call D (H100, ~2.5 min): the worker owning its heap (validate.own_the_heap): the
# probe's collections, then the README's main job cold and rerun (32.9 s / 3.8 s at call A).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
mkdir -p /tmp/p && kgen generate --in 8192 --out 8192 -o /tmp/p/main.py > /dev/null 2>&1
t "probe"
timeout 120 python3 docs/experiments/s27/probe_freeze.py /tmp/p/main.py 2>&1 | tee $OUT/probe_freeze.log | grep -vE "^  collect" | cut -c1-250
t "main job cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[|^plot" $OUT/main_job_cold.log | cut -c1-160
t done
