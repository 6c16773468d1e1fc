# Session 55's usage probe (docs/experiments/s55/usage_probe.py): five reference modules, each
# emitted file used as users use it (optimizer loops, weight edits between calls, functional_call,
# checkpoint, moves and copies, odd inputs, streams, torch.compile, CUDA graphs), against eager and
# fp64. One device call of at most ~7 minutes: the probe stops its cases at USAGE_DEADLINE seconds
# (default 360 here) and writes $OUT/usage/summary.txt and results.jsonl as it goes.
set -u
OUT=${OUT:-/tmp/out}; export OUT
mkdir -p $OUT
source scripts/device_setup.sh
t "setup done"
export USAGE_DEADLINE=${USAGE_DEADLINE:-360}
timeout 420 python3 docs/experiments/s55/usage_probe.py "$@" > $OUT/usage_probe.log 2>&1
echo "probe exit $?"
t "probe done"
# Build lines, then the short summary (verdict counts and a line per case not plainly ok).
grep -E "^  [a-z_]+ (float|bfloat)|took" $OUT/usage/summary.txt | cut -c1-220
cat $OUT/usage/summary_short.txt | cut -c1-300 | head -c 9000
