# Session 22: fp16x3 with w split in registers at the batches up to FP16X3_W_IN_REGISTERS_MAX_ROWS,
# chosen at run time. Times KernelBench 33 (1024 rows: the split pass) and 59 (128 rows: w in
# registers) as docs/experiments/device_session22_wreg.sh does, runs the fp16x3 gate tests (w in
# registers at 200 and 300 rows, the pass at 1000), then `kgen search --top 1` of 55, 56, 59
# (records to $OUT/results). Needs `cp -r ../shared/kernelbench .kb` and carry [".kb"].
. scripts/device_setup.sh
python3 docs/experiments/s22/wreg_files.py /tmp/s22 .kb/level2 33 59 > /dev/null
t "build"
for f in /tmp/s22/k*_tf32x3.py /tmp/s22/k*_split.py /tmp/s22/k*_wreg.py; do
  timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 &
done; wait
for n in 33 59; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 100 python3 scripts/compare_forward.py $ref /tmp/s22/k${n}_tf32x3.py /tmp/s22/k${n}_split.py /tmp/s22/k${n}_wreg.py 2>&1 | grep -v "eager rounds" | tail -5
done
t "gpu tests"
timeout 230 python3 -m pytest -q -m gpu tests/test_fp16x3.py -x 2>&1 | tail -6
mkdir -p $OUT/results
for n in ${SEARCH:-55 59 56}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "search $n"
  timeout 150 kgen search $ref --tol 1e-4 --top 1 --out-dir /tmp/s22/gen > $OUT/search_$n.log 2>&1
  tail -4 $OUT/search_$n.log | cut -c1-240
  cp results/search_${n}_*.json $OUT/results/ 2>/dev/null
done
t done
