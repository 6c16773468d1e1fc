# Session 27, call F (H100, ~7 min), at main with the fp16x3 split-K merged and the worker owning
# its heap: 1. the README's main job cold twice more, each in fresh folders, the GPU quiet
# (27.8 s in call D; call E's 32.1 s had a build running beside it); 2. the GPU tests of the
# search's path and the gate after validate.own_the_heap, and tests/test_gpu.py's fp16x3 cases
# (the merged split-K: its own tests passed in call B).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
for i in 1 2; do
  t "main job, cold and rerun, round $i"
  mkdir -p $OUT/round$i && OUT=$OUT/round$i bash scripts/time_main_job.sh > /dev/null 2>&1
  cat $OUT/round$i/main_job_times.txt; grep -E "^\[|build \[|eval  \[|^plot" $OUT/round$i/main_job_cold.log | cut -c1-140
done
t "gpu tests"
timeout 420 python3 -m pytest -m gpu -q -rfEx tests/test_search_gpu.py tests/test_faults.py "tests/test_gpu.py" -k "fp16x3 or test_search_gpu or test_faults" \
  > $OUT/f_gpu_tests.log 2>&1
echo "exit $?"; grep -E "FAILED|ERROR" $OUT/f_gpu_tests.log | head | cut -c1-300; tail -2 $OUT/f_gpu_tests.log | cut -c1-300
t done
