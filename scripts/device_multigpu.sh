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
#    (RUN_TESTS=0 skips 1 and 2; RUN_SEARCH=0 skips 3.)
# 3. one `kgen search FILES... --tol 1e-4 $SEARCH_FLAGS` of KernelBench files (NUMS; NUMS=all: the 36; FIRST,
#    LAST: a slice of them) for each --gpus value in GPUS (default "2 1"), each from cold caches
#    (measurements and torch-extension builds); with several GPUs one search per GPU runs at
#    once (tune.several). nvidia-smi samples each GPU's utilization every second meanwhile. The
#    wall time of each -> $OUT/search_times.txt; logs, records and utilization beside it.
# Each step has a time limit (TEST_LIMIT, TIMING_LIMIT, SEARCH_LIMIT).
set -u
OUT=${OUT:-/tmp/kgen_multigpu}
mkdir -p "$OUT"
. scripts/device_setup.sh
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())"

if [ "${RUN_TESTS:-1}" = 1 ]; then
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
fi

[ "${RUN_SEARCH:-1}" = 1 ] || { t done; exit 0; }
# ---- kgen search of several files: --gpus 2 against --gpus 1 ----
NUMS=${NUMS:-"33 84 12"}
# NUMS=all: KernelBench's 36 files (issue 26's search with both GPUs busy, against one).
[ "$NUMS" = all ] && NUMS=$(ls .kb/level2 | cut -d_ -f1 | sort -n | tr '\n' ' ')
NUMS=$(echo $NUMS | tr ' ' '\n' | sed -n "${FIRST:-1},${LAST:-999}p" | tr '\n' ' ')
FILES=$(for n in $NUMS; do ls .kb/level2/${n}_*.py; done)
W=/tmp/kgen_mg_search
rm -rf $W && mkdir -p $W
for gpus in ${GPUS:-2 1}; do
  name=gpus${gpus}
  t "search --gpus $gpus, cold: $(echo $NUMS)"
  mkdir -p $W/$name
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader -l 1 \
    > $OUT/search_${name}_utilization.csv 2>/dev/null &
  smi=$!
  t0=$(date +%s.%N)
  KGEN_CACHE_DIR=$W/$name/cache TORCH_EXTENSIONS_DIR=$W/$name/ext timeout ${SEARCH_LIMIT:-540} \
    python3 -m kgen.cli search $FILES --tol 1e-4 --gpus $gpus ${SEARCH_FLAGS:-} \
    --out-dir $W/$name/out --results-dir $W/$name/results > $OUT/search_$name.log 2>&1
  rc=$?
  t1=$(date +%s.%N)
  kill $smi 2>/dev/null
  python3 -c "print(f'search --gpus $gpus of $(echo $FILES | wc -w) files ($(echo $NUMS)): {$t1 - $t0:.1f} s wall, exit $rc')" \
    | tee -a $OUT/search_times.txt
  sed -n '/^file /,$p' $OUT/search_$name.log | cut -c1-120
  # the share of the search's seconds in which each GPU was busy (utilization > 0)
  python3 - $OUT/search_${name}_utilization.csv <<'EOF' | tee -a $OUT/search_times.txt
import collections, sys
busy, total = collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) >= 3 and parts[2].endswith("%"):
        total[parts[1]] += 1
        busy[parts[1]] += int(parts[2].rstrip(" %")) > 0
print("  GPU busy (utilization > 0) in " + ", ".join(f"GPU {g}: {busy[g]}/{total[g]} s" for g in sorted(total)))
EOF
done
# which GPU searched what: per record, the GPUs it names and where each candidate was measured
python3 - $W > $OUT/search_gpus.txt <<'EOF'
import collections, json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/results/search_*.json")):
    r = json.loads(p.read_text())
    per = collections.Counter(c.get("gpu") for c in r["candidates"] if c.get("measured"))
    print(p.parent.parent.name, r["search"], "host GPUs", [g.get("host_gpu") for g in r.get("gpus", [])],
          "measured per GPU", dict(per), "winners", {t: w["name"] for t, w in r["winners"].items()})
EOF
cut -c1-220 $OUT/search_gpus.txt | head -80
tar czf $OUT/search_records.tgz -C $W $(cd $W && ls -d */results) 2>/dev/null
cat $OUT/search_times.txt
t done
