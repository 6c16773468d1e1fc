# kgen search on some of KernelBench's published files (NUMS: their numbers), then KernelBench's
# eval, kgen's fp64 replay and bench on each winner, in one device call. DTYPE (fp32, bf16,
# fp16; default fp32): the module's dtype for the search and KernelBench's precision for its
# eval, at KernelBench's tolerance for it. The search records and winners come back in
# $OUT/search.tgz (results/ and generated/ layout). VS_COMPILE=1: the search times its winner
# against torch.compile (default and max-autotune) too.
. scripts/device_setup.sh
DTYPE=${DTYPE:-fp32}
tol=$([ "$DTYPE" = fp32 ] && echo 0.0001 || echo 0.01)
suffix=$([ "$DTYPE" = fp32 ] && echo "" || echo "_$DTYPE")
mkdir -p /tmp/s/results /tmp/s/generated /tmp/s/win
for n in $NUMS; do
  r=$(ls .kb/level2/${n}_*.py)
  t "search $r ($DTYPE)"
  timeout ${SEARCH_LIMIT:-150} python3 -m kgen.cli search $r --dtype $DTYPE --tol $tol ${VS_COMPILE:+--vs-compile} --out-dir /tmp/s/generated --results-dir /tmp/s/results > $OUT/search_$n.log 2>&1
  grep -E "note:|fastest valid|no candidate|no variant|error" $OUT/search_$n.log | cut -c1-250
  w=$(ls /tmp/s/generated/$(basename $r .py)_*tol${tol}${suffix}.py 2>/dev/null | head -1)
  [ -n "$w" ] && cp $w /tmp/s/win/$(basename $r)
done
t "KernelBench eval of the winners ($DTYPE)"
refs=$(for f in /tmp/s/win/*.py; do echo .kb/level2/$(basename $f); done)
timeout ${EVAL_LIMIT:-200} python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/s/win --precision $DTYPE ${BENCH_COMPILE:+--compile --autotune} $refs > $OUT/kb_winners.log 2>&1
grep "^|" $OUT/kb_winners.log
tar czf $OUT/search.tgz -C /tmp/s results generated
t done
