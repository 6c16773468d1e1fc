#!/usr/bin/env bash
# Times the README's main job on a GPU machine, as a new user meets it: cold (no torch extension
# build and no kgen measurement cached: fresh TORCH_EXTENSIONS_DIR and KGEN_CACHE_DIR), then
# rerun (everything cached); then the headline `kgen generate` + `kgen bench`. Runs in a scratch
# directory so the repository's generated/ and results/ are untouched. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kgen_out}
mkdir -p "$OUT"
scratch=$(mktemp -d)
export TORCH_EXTENSIONS_DIR="$scratch/torch_extensions" KGEN_CACHE_DIR="$scratch/kgen_cache"
cd "$scratch"
main_job=(kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024)
for run in cold rerun; do
  start=$(date +%s.%N)
  "${main_job[@]}" >"$OUT/main_job_$run.log" 2>&1
  rc=$?
  python3 -c "import sys; print(f'main job {sys.argv[1]}: rc={sys.argv[2]}, {float(sys.argv[4]) - float(sys.argv[3]):.1f} s wall')" \
    "$run" "$rc" "$start" "$(date +%s.%N)" | tee -a "$OUT/main_job_times.txt"
done
# The headline command, then its file against eager PyTorch (the search above left a results
# record here, which generate reuses: the command a user runs after a search).
kgen generate --in 8192 --out 8192 -o headline.py 2>&1 | tee "$OUT/generate.log"
kgen bench headline.py 2>&1 | tee "$OUT/bench_headline.log"
# And without any record: the rule's choice.
mkdir -p norecord && cd norecord
kgen generate --in 8192 --out 8192 -o headline_rule.py 2>&1 | tee "$OUT/generate_rule.log"
kgen bench headline_rule.py 2>&1 | tee "$OUT/bench_headline_rule.log"
