# Session 18, issues 21 and 25: tf32x3 with x as the shared-memory operand (KGEN_WS_X_AS_B in
# kernels/gemm_wgmma_ws.cuh) against the shipped roles, on KernelBench files' default kgen files
# (written on the CPU machine into s18files/ by docs/experiments/s18/x_as_b_files.py). Builds
# them all at once, checks the outputs at several batches (split-K included), times each module's
# two files interleaved with eager (scripts/compare_forward.py, 7 rounds), then kgen validate of
# two swapped files. Carry .kb (KernelBench).
. scripts/device_setup.sh
t "build $(ls s18files/*.py | wc -l) files"
for f in s18files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -20 /tmp/build_$(basename $f .py).log; }) &
done; wait
t "built"
for n in ${CHECK:-12 33 56}; do
  t "check $n"
  timeout 120 python3 docs/experiments/s18/check_batches.py $(ls .kb/level2/${n}_*.py) s18files/k${n}_base.py s18files/k${n}_swap.py 2>&1 | tee $OUT/check_$n.log
done
for n in ${NUMS:-56 33 39 55 59 12 84 30 97}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout ${COMPARE_LIMIT:-90} python3 scripts/compare_forward.py $ref s18files/k${n}_base.py s18files/k${n}_swap.py 2>&1 | tee $OUT/compare_$n.log
done
for n in ${VALIDATE:-}; do
  t "validate $n"
  timeout 120 kgen validate s18files/k${n}_swap.py --ref $(ls .kb/level2/${n}_*.py) > $OUT/validate_$n.log 2>&1; tail -4 $OUT/validate_$n.log
done
t done
