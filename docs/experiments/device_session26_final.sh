# Session 26, one H100 call (carry .kb), ~9 min: this session's changes on the GPU.
#  1. tests/test_faults.py (the gate's planted faults, with get_inputs() memoized and the kink
#     look skipped for smooth modules) and tests/test_gpu.py's search-path tests;
#  2. the warm worker's evaluation and full validation profiled again, gc timed apart from the
#     GPU's queued work (docs/experiments/s26/profile_eval.py);
#  3. the README's main job cold and rerun (scripts/time_main_job.sh), against 39.2 s / 3.5 s
#     at 6e8e843 this morning;
#  4. issue 25 item 2 for KernelBench 33 (BatchNorm) at 128 / 1024 / 16384, then 7 and 2051.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
t "gpu tests: faults"
timeout 200 python3 -m pytest -m gpu -q -rfEx tests/test_faults.py > $OUT/s26_gpu_faults.log 2>&1
echo "exit $?"; tail -3 $OUT/s26_gpu_faults.log | cut -c1-300
t "main job cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[" $OUT/main_job_cold.log | cut -c1-160
t "profile"
mkdir -p /tmp/p && python3 -m kgen.cli generate --in 8192 --out 8192 -o /tmp/p/main.py > $OUT/s26_profile2.log 2>&1
timeout 100 python3 docs/experiments/s26/profile_eval.py /tmp/p/main.py --top 30 >> $OUT/s26_profile2.log 2>&1
echo "exit $?"; grep "^===" $OUT/s26_profile2.log
NUMS=${NUMS:-33} KB_LIMIT=${KB_LIMIT:-200} bash docs/experiments/device_session25_batches.sh
