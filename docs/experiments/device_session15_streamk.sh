# Session 15, issues 21 and 25: stream-K for a batch of one tile row (StreamK in, now in
# docs/experiments/s15/stream_k.patch: apply it to e4152bc to make the "_sk" files;
# kernels/gemm_wgmma_ws.cuh). KernelBench 55/56/59's files before (k<N>_base.py, the plain
# kernel) and after (k<N>_sk.py), written on the CPU machine into s15files/, timed interleaved
# with eager (scripts/compare_forward.py, 7 rounds); `kgen validate` of 56's; the stream-K and
# split-K GPU tests. Carry .kb (KernelBench).
. scripts/device_setup.sh
for f in s15files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -30 /tmp/build_$(basename $f .py).log; }) &
done; wait
t "built"
for n in ${NUMS:-56 55 59}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 150 python3 scripts/compare_forward.py $ref s15files/k${n}_base.py s15files/k${n}_sk.py 2>&1 | tee $OUT/compare_$n.log
done
t "validate 56"
timeout 200 python3 -m kgen.cli validate s15files/k56_sk.py --ref .kb/level2/56_Matmul_Sigmoid_Sum.py > $OUT/validate_56.log 2>&1; echo "exit $?"; tail -22 $OUT/validate_56.log
t "gpu tests"
timeout ${TESTS_LIMIT:-240} python3 -m pytest -m gpu -q -x tests/test_stream_k_gpu.py tests/test_split_k_gpu.py > $OUT/gpu_tests.log 2>&1; tail -15 $OUT/gpu_tests.log
t done
