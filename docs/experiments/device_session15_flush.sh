# Session 15, issues 21 and 25: the tf32x3 flush interval (docs/experiments/s15/flush_variants.py)
# on KernelBench 33, 56 and 39's default files. The variants are written on the CPU machine into
# s15files/ (k<N>_<variant>.py); this builds them all at once and times each module's variants
# interleaved with eager (scripts/compare_forward.py, 7 rounds). Carry .kb (KernelBench).
. scripts/device_setup.sh
t "build $(ls s15files/*.py | wc -l) files"
for f in s15files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -20 /tmp/build_$(basename $f .py).log; }) &
done; wait
t "built"
for n in ${NUMS:-56 33 39}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout ${COMPARE_LIMIT:-150} python3 scripts/compare_forward.py $ref $(ls s15files/k${n}_*.py) 2>&1 | tee $OUT/compare_$n.log
done
t done
