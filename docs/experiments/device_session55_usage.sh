# Session 55's usage probe (docs/experiments/s55/usage_probe.py): five reference modules, each
# emitted file used as users use it (optimizer loops, weight edits between calls, functional_call,
# checkpoint, moves and copies, odd inputs, streams, torch.compile, CUDA graphs), against eager and
# fp64; a compile case also against the reference compiled the same way (CTRL where that fails
# alike), a LeakyReLU WRONG diagnosed for kink flips (KINK). One device call of at most ~6 minutes:
# the probe stops its cases at USAGE_DEADLINE seconds (330 here, counted from its start: generation
# ~15 s, builds ~45 s beside the workers' start, then the cases on 2 main + 3 compile workers a file)
# and writes $OUT/usage/summary.txt, summary_short.txt and results.jsonl as it goes.
#
#   bash docs/experiments/device_session55_usage.sh                       # everything
# A focused rerun (arguments go to the probe; --only is a case-name glob, repeatable):
#   bash docs/experiments/device_session55_usage.sh --files gemm_bias_leakyrelu --only 'opt_adam*' --only 'edit_weights_swapped*'
#   bash docs/experiments/device_session55_usage.sh --groups compile                 # torch.compile and CUDA graphs only
#   bash docs/experiments/device_session55_usage.sh --files mlp,gemm_bn_gelu --only 'compile_reduce_overhead*'
#   USAGE_DEADLINE=200 bash docs/experiments/device_session55_usage.sh --only 'edit_*' --main-workers 3
# (python3 docs/experiments/s55/usage_probe.py --list [--files ...] [--only ...] lists the cases.)
set -u
OUT=${OUT:-/tmp/out}; export OUT
mkdir -p $OUT
source scripts/device_setup.sh
t "setup done"
export USAGE_DEADLINE=${USAGE_DEADLINE:-330}
timeout $((USAGE_DEADLINE + 60)) python3 docs/experiments/s55/usage_probe.py "$@" > $OUT/usage_probe.log 2>&1
echo "probe exit $?"
t "probe done"
# Build and timing lines, then the short summary (verdict counts, a line per case not plainly ok,
# the slowest cases), at most 9 KB.
grep -E "^  [a-z_]+ (float|bfloat)|took|workers \(t=|builds done|total [0-9]" $OUT/usage/summary.txt | cut -c1-160 | head -30
head -c 9000 $OUT/usage/summary_short.txt
