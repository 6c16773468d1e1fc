# Session 10: A/B of emitted files from two kernel versions, in one process per module
# (scripts/compare_forward.py), then the full gate and GPU tests on the new code. The files are
# made before the call (kgen generate at the old and the new commit) into s10files/ (untracked,
# carried with the tree): k<NUM><label>_{old,new,...}.py. Carry .kb (KernelBench).
. scripts/device_setup.sh
t "build $(ls s10files/*.py | wc -l) files"
for f in s10files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -20 /tmp/build_$(basename $f .py).log; }) &
done; wait
t "built"
for group in $(ls s10files/*.py | sed 's|s10files/\(k[0-9a-z]*\)_.*|\1|' | sort -u); do
  n=$(echo $group | sed 's/k\([0-9]*\).*/\1/')
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $group"
  timeout ${COMPARE_LIMIT:-150} python3 scripts/compare_forward.py $ref $(ls s10files/${group}_*.py) 2>&1 | tee $OUT/compare_$group.log | grep -v "eager rounds"
done
if [ -n "${VALIDATE:-}" ]; then
  for f in $VALIDATE; do
    n=$(basename $f | sed 's/k\([0-9]*\).*/\1/')
    t "kgen validate $f"
    timeout 200 python3 -m kgen.cli validate $f ${VALIDATE_FLAGS:-} --ref $(ls .kb/level2/${n}_*.py) > $OUT/validate_$(basename $f .py).log 2>&1; echo "exit $?"; tail -4 $OUT/validate_$(basename $f .py).log
  done
fi
if [ -n "${GPU_TESTS:-}" ]; then
  t "gpu tests: $GPU_TESTS"
  timeout ${GPU_TESTS_LIMIT:-240} python3 -m pytest -m gpu -q -x $GPU_TESTS > $OUT/gpu_tests.log 2>&1; tail -6 $OUT/gpu_tests.log
fi
t done
