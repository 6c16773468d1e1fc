# Session 48, call A: (1) the ceiling of the host-time lever: KernelBench's own timing of three
# bf16 files as written, without a gradient wanted, and as a bare launch of the same kernels
# (s48/host_ceiling.py); (2) session 47's leftovers: test_half_gpu's 6 output_written tests and
# test_custom_ops' 3 autocast tests, at session 47's last code (a68e193).
# (ab/kbN.py, not committed: `kgen generate .kb/level2/N_*.py --dtype bf16 -o ab/kbN.py` at a68e193.)
source scripts/device_setup.sh
t "build"
build_files ab a_builds.log
t "ceiling"
for n in 12 33 66; do
  timeout 90 python3 docs/experiments/s48/host_ceiling.py $(ls .kb/level2/${n}_*.py) bf16 ab/kb${n}.py > $OUT/a_ceiling_kb${n}.md 2>&1
  tail -7 $OUT/a_ceiling_kb${n}.md
done
t "tests"
gpu_tests a_gpu_output_written.log 200 tests/test_half_gpu.py -k "output_written and (sigmoid_gemm or groupnorm or 300)"
left=$(( 540 - ($(date +%s) - start) ))
gpu_tests a_gpu_custom_ops_autocast.log $left tests/test_custom_ops.py -k autocast_compiles
t "end"
