# Session 21: fp16x3 in the search, on an H100. `kgen search --top 1` of KernelBench 33, 84 and 39
# (the files with an earlier record: its winner was tf32x3, before fp16x3 existed) writes their new
# records; then scripts/compare_forward.py times, in one process per module, the tf32x3 file of
# the old record (base), the fp16x3 file (kgen generate --math fp16x3) and eager fp32, for 33, 12,
# 84 and 39. Records and logs under $OUT (results/ and generated/ copied back).
. scripts/device_setup.sh
mkdir -p /tmp/s21 $OUT/results
for n in 33 12 84 39; do
  ref=$(ls .kb/level2/${n}_*.py)
  kgen generate $ref -o /tmp/s21/base$n.py --force > /dev/null
  kgen generate $ref --math fp16x3 -o /tmp/s21/fp16x3_$n.py --force > /dev/null
done
t "build"
for f in /tmp/s21/*.py; do timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 & done; wait
for n in 33 12 84 39; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 100 python3 scripts/compare_forward.py $ref /tmp/s21/base$n.py /tmp/s21/fp16x3_$n.py 2>&1 | tail -5
done
for n in ${SEARCH:-33 84 39}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "search $n"
  timeout 200 kgen search $ref --tol 1e-4 --top 1 --out-dir /tmp/s21/gen > $OUT/search_$n.log 2>&1
  tail -4 $OUT/search_$n.log | cut -c1-240
  cp results/search_${n}_*.json $OUT/results/ 2>/dev/null
done
t done
