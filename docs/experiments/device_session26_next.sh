# What session 26 left for the next session's device time (its own ran out): one H100 call,
# ~5 min. 1. the GPU tests of the search's path and the gate (the fallback as a reserve, the
# memoized draws, the kink look only where a module bends, the worker's thaw, the plot drawn
# during the validation: all CPU-tested only); 2. the README's main job cold and rerun against
# session 26's 37.0 s / 4.3-4.9 s (issue 25: <= 30 s / <= 5 s); 3. the warm worker's evaluation
# and full validation with gc timed apart (expected: collections ~0 s, were 1.25 s / 2.0 s).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
t "gpu tests: the search end to end, the faults"
timeout 300 python3 -m pytest -m gpu -q -rfEx tests/test_search_gpu.py tests/test_faults.py \
  > $OUT/s27_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/s27_gpu_tests.log | cut -c1-300
t "main job cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[|^plot" $OUT/main_job_cold.log | cut -c1-160
t "the worker's evaluation and full validation, gc timed apart"
bash docs/experiments/device_session26_thaw.sh 2>&1 | grep -E "^(evaluate|full|freeze)" | cut -c1-220
t done
