# Session 10, the end: the README's main job cold and rerun (scripts/time_main_job.sh), one
# candidate's evaluation phases (docs/experiments/s10/candidate_phases.py on KernelBench 33's
# file, made here), then GPU tests (GPU_TESTS, default tests/test_faults.py). Carry .kb.
. scripts/device_setup.sh
t "main job"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt
grep -E "^\[" $OUT/main_job_cold.log | tail -6
t "candidate phases (KernelBench 33)"
python3 -m kgen.cli generate .kb/level2/33_Gemm_Scale_BatchNorm.py -o /tmp/k33.py --force > /dev/null
python3 -m kgen.tune.worker build /tmp/k33.py > /dev/null 2>&1
timeout 200 python3 docs/experiments/s10/candidate_phases.py /tmp/k33.py .kb/level2/33_Gemm_Scale_BatchNorm.py > $OUT/candidate_phases.log 2>&1
grep -E "round|EmittedFile|the quick tier|the full tier|bench|construction" $OUT/candidate_phases.log
t "gpu tests: ${GPU_TESTS:-tests/test_faults.py}"
timeout ${GPU_TESTS_LIMIT:-300} python3 -m pytest -m gpu -q ${GPU_TESTS:-tests/test_faults.py} > $OUT/gpu_tests.log 2>&1; tail -4 $OUT/gpu_tests.log
t done
