# kgen search on some of KernelBench's published files (NUMS: their numbers), then KernelBench's
# eval, kgen's fp64 replay and bench on each winner, in one device call. The search records
# and winners come back in $OUT/search.tgz (results/ and generated/ layout).
. scripts/device_setup.sh
mkdir -p /tmp/s/results /tmp/s/generated /tmp/s/win
for n in $NUMS; do
  r=$(ls .kb/level2/${n}_*.py)
  t "search $r"
  timeout ${SEARCH_LIMIT:-150} python3 -m kgen.cli search $r --tol 1e-4 --out-dir /tmp/s/generated --results-dir /tmp/s/results > $OUT/search_$n.log 2>&1
  grep -E "note:|fastest valid|no candidate|error" $OUT/search_$n.log | cut -c1-250
  w=$(ls /tmp/s/generated/$(basename $r .py)_*tol0.0001.py 2>/dev/null | head -1)
  [ -n "$w" ] && cp $w /tmp/s/win/$(basename $r)
done
t "KernelBench eval of the winners"
refs=$(for f in /tmp/s/win/*.py; do echo .kb/level2/$(basename $f); done)
timeout ${EVAL_LIMIT:-200} python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/s/win $refs > $OUT/kb_winners.log 2>&1
grep "^|" $OUT/kb_winners.log
tar czf $OUT/search.tgz -C /tmp/s results generated
t done
