# Session 27, call A (H100, ~7 min), on s27-dev (main + the split-K and persistent branches):
# what session 26 left untimed on the search's path (device_session26_next.sh): the main job
# cold and rerun (issue 25: <= 30 s / <= 5 s; 37.0 s / 4.3-4.9 s at a5d52c8), the worker's
# evaluation with gc timed apart, then the GPU tests of the search's path and the gate.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
t "main job cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[|^plot" $OUT/main_job_cold.log | cut -c1-160
t "the worker's evaluation and full validation, gc timed apart"
bash docs/experiments/device_session26_thaw.sh 2>&1 | grep -E "^(evaluate|full|freeze)" | cut -c1-220
t "gpu tests: the search end to end, the faults"
timeout 330 python3 -m pytest -m gpu -q -rfEx tests/test_search_gpu.py tests/test_faults.py \
  > $OUT/gpu_tests.log 2>&1
echo "exit $?"; grep -E "FAILED|ERROR" $OUT/gpu_tests.log | head | cut -c1-300; tail -2 $OUT/gpu_tests.log | cut -c1-300
t done
