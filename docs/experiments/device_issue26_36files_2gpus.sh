# Issue 26's measurement: `kgen search` of KernelBench's 36 level-2 GEMM files as published, every
# cache empty, on a 2-GPU host (one search per GPU at once: tune.several). The table at the end
# states the wall time against the searches' own (their sum: one GPU, one search after another).
# Carry .kb (a copy of ../shared/kernelbench). Session 24's six files took 142 s against 266 s
# (docs/perf.md), so the 36 should take ~14 min on two H200s, more than one call's 10 minutes:
# PART=1 and PART=2 each search half of them (the sorted list's first and second 18), the two
# walls and the two sums of the searches' own times added; the bytecode kept as a pip install
# keeps it (the image sets PYTHONDONTWRITEBYTECODE).
# Session 25: part 1 took longer than one call (55/56/59's full validations ~95 s each): it was
# cut at 600 s with 16 files done; FILES= ran the rest in two calls.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
nvidia-smi --query-gpu=index,name --format=csv,noheader
t "compileall"
python3 -m compileall -q -j 32 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
files=$(ls .kb/level2/*.py | sort | if [ "${PART:-1}" = 1 ]; then head -18; else tail -n +19; fi)
# Or FILES="56 59 ..." (KernelBench's problem numbers): the files a cut-short part left.
if [ -n "$FILES" ]; then files=$(for n in $FILES; do ls .kb/level2/${n}_*.py; done); fi
t "part ${PART:-1}: $(echo $files | wc -w) files on two GPUs"
/usr/bin/time -f "wall %e s" kgen search $files --gpus all --out-dir $OUT/gen --results-dir $OUT/res \
  --summary-json $OUT/issue26_summary_${PART:-1}.json > $OUT/issue26_36files_2gpus_${PART:-1}.log 2>&1
echo "exit $?"
tail -26 $OUT/issue26_36files_2gpus_${PART:-1}.log | cut -c1-160
rm -rf $OUT/gen $OUT/res
t done
