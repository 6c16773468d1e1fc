# On a host with 2 GPUs, from the repository root (KernelBench copied to .kb/ for the search
# timings), logs under $OUT (default /tmp/kgen_multigpu):
#
#     OUT=/tmp/out bash scripts/device_multigpu.sh
#
# 1. tests/test_multigpu.py (pytest -m multigpu -s: DDP, FSDP2, torch.compile of DDP, the
#    SyncBatchNorm refusal, a block on each GPU in one process; per-step times of kgen's blocks
#    and the reference's printed) -> $OUT/multigpu_tests.log
# 2. the DDP run again at batch 1024 x 4096 features, for per-step times nearer KernelBench's
#    shapes -> $OUT/multigpu_timing_1024x4096.log
# 3. kgen search of a few KernelBench files (NUMS; NUMS=all: the 36) with --gpus 2 and with --gpus 1, each from
#    cold caches (measurements and builds: both pay the same builds), then again with the builds
#    warm (measuring only); the wall time of each -> $OUT/search_times.txt, the logs and records
#    beside it.
# About 8 minutes in all; each step has a time limit, and the warm-build searches run only when
# there is time left (BUDGET seconds, default 450).
set -u
OUT=${OUT:-/tmp/kgen_multigpu}
mkdir -p "$OUT"
. scripts/device_setup.sh
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())"

t "multigpu tests"
timeout ${TEST_LIMIT:-300} python3 -m pytest -m multigpu -s -q -rfEs --durations=8 tests/test_multigpu.py \
  > $OUT/multigpu_tests.log 2>&1
echo "exit $?"
grep -E "rank [01] \(cuda|passed|failed|error" $OUT/multigpu_tests.log | cut -c1-400 | tail -20

t "DDP at 1024x4096 (timings)"
KGEN_MULTIGPU_SHAPE=1024x4096 timeout ${TIMING_LIMIT:-120} python3 -m pytest -m multigpu -s -q -rfE \
  tests/test_multigpu.py -k "train and ddp and not compile" > $OUT/multigpu_timing_1024x4096.log 2>&1
echo "exit $?"
grep -E "rank [01] \(cuda|passed|failed|error" $OUT/multigpu_timing_1024x4096.log | cut -c1-400 | tail -6

# ---- search wall time, --gpus 2 against --gpus 1 ----
NUMS=${NUMS:-"33 84 12"}
# NUMS=all: KernelBench's 36 files (issue 26's search with both GPUs busy, against one).
[ "$NUMS" = all ] && NUMS=$(ls .kb/level2 | cut -d_ -f1 | sort -n | tr '\n' ' ')
FILES=$(for n in $NUMS; do ls .kb/level2/${n}_*.py; done)
W=/tmp/kgen_mg_search
rm -rf $W && mkdir -p $W
search() {   # search NAME GPUS EXTDIR: every file, one after another; prints the wall time
  local name=$1 gpus=$2 ext=$3 t0 t1 rc
  mkdir -p $W/$name/out $W/$name/results $ext
  t0=$(date +%s.%N)
  for f in $FILES; do
    KGEN_CACHE_DIR=$W/$name/cache TORCH_EXTENSIONS_DIR=$ext timeout ${SEARCH_LIMIT:-150} \
      python3 -m kgen.cli search $f --tol 1e-4 --gpus $gpus \
      --out-dir $W/$name/out --results-dir $W/$name/results >> $OUT/search_$name.log 2>&1
    rc=$?
    echo "  $(basename $f): exit $rc" >> $OUT/search_$name.log
  done
  t1=$(date +%s.%N)
  python3 -c "print(f'search $name (--gpus $gpus, $(echo $NUMS)): {$t1 - $t0:.1f} s wall')" | tee -a $OUT/search_times.txt
  grep -E "fastest valid|no candidate|exit [1-9]" $OUT/search_$name.log | cut -c1-250
}
t "search --gpus 2, cold"
search gpus2_cold 2 $W/ext2
t "search --gpus 1, cold"
search gpus1_cold 1 $W/ext1
if [ $(( $(date +%s) - start )) -lt ${BUDGET:-450} ]; then
  t "search --gpus 2, builds warm"
  search gpus2_warm 2 $W/ext2
fi
if [ $(( $(date +%s) - start )) -lt ${BUDGET:-450} ]; then
  t "search --gpus 1, builds warm"
  search gpus1_warm 1 $W/ext1
fi
# which GPU measured what: per record, the candidates each GPU measured
python3 - $W > $OUT/search_gpus.txt <<'EOF'
import collections, json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/results/search_*.json")):
    r = json.loads(p.read_text())
    per = collections.Counter(c.get("gpu") for c in r["candidates"] if c.get("measured"))
    print(p.parent.parent.name, r["search"], "gpus", [g["index"] for g in r.get("gpus", [])],
          "measured per GPU", dict(per), "runoff/validation GPU", r.get("runoff_and_validation_gpu"),
          "winners", {t: (w["name"], w.get("measured_on_gpu")) for t, w in r["winners"].items()})
EOF
cat $OUT/search_gpus.txt | cut -c1-300
tar czf $OUT/search_records.tgz -C $W $(cd $W && ls -d */results) 2>/dev/null
cat $OUT/search_times.txt
t done
