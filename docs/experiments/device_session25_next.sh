# What session 25 left for the next session's device time (its own was spent on issue 26's
# 36-file search). One call on an H100 (~6 min):
#   1. tests/test_search_gpu.py: a whole search whose runoff and full validation are requests
#      to the warm GPU worker (0c60442; CPU-tested with fake workers only), and test_gpu.py's
#      runoff test (now a request to a worker too);
#   2. the README's main job with Python's bytecode kept (session 24's method), cold and rerun:
#      four candidates since the cost model's refit (6893472) and no fresh processes for the
#      runoff and the validation; against session 24's 53.1 s cold / 4.35-4.78 s rerun.
# Then, on nvidia-h200-x2: RUN_SEARCH=0 OUT=$OUT bash scripts/device_multigpu.sh (issue 26's DDP
# and FSDP2 tests at today's code; last run in session 15); and on an H100
# docs/experiments/device_session25_batches.sh (issue 25, item 2, carry .kb).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "compileall"
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
python3 -c "import kgen.cli, kgen.tune.worker, kgen.check.validate"
t "gpu tests: the search end to end, the runoff"
timeout 240 python3 -m pytest -m gpu -v -rfEx tests/test_search_gpu.py "tests/test_gpu.py" -k "end_to_end or runoff" \
  > $OUT/s25_search_gpu_tests.log 2>&1
echo "exit $?"; tail -5 $OUT/s25_search_gpu_tests.log | cut -c1-300
t "main job cold and rerun (scripts/time_main_job.sh: fresh caches, a scratch directory)"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[" $OUT/main_job_cold.log | cut -c1-140
t done
