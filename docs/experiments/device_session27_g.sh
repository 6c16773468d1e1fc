# Session 27, call G (H100, ~3 min): the README's main job cold and rerun, twice, with the
# search's worker ending without the interpreter's teardown (worker.exit_now; the search's
# "record" line came ~1 s after the winner's in calls D and F, the wait for that teardown).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
for i in 1 2; do
  t "main job, cold and rerun, round $i"
  mkdir -p /tmp/r$i && OUT=/tmp/r$i bash scripts/time_main_job.sh > /dev/null 2>&1
  cat /tmp/r$i/main_job_times.txt; grep -E "^\[|build \[|eval  \[|^plot" /tmp/r$i/main_job_cold.log | cut -c1-140
  cp /tmp/r$i/main_job_cold.log $OUT/main_job_cold_$i.log; cp /tmp/r$i/main_job_times.txt $OUT/main_job_times_$i.txt
done
tail -4 /tmp/r2/bench_headline.log | tee $OUT/bench_headline.log
t done
