"""The search's cost model (kgen.tune.search.predicted_ms) against what the candidates measured in
session 25's search of KernelBench's 36 files (docs/logs/2026-11-28_h200x2_s25_issue26_part*.log):
for each file and candidate, predicted / measured, each relative to the file's best; then the
candidates the model would keep at PRUNE_FACTOR. Runs on the CPU (no GPU: the specs are built as
the search builds them).

    python docs/experiments/s25/cost_model_fit.py [KB_DIR]
"""
import collections
import glob
import re
import sys
from pathlib import Path

from kgen.frontend.problems import graph, load
from kgen.tune import search
from kgen.tune.spec import Spec, Workload

SMS = 132
kb = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/kernelbench") / "level2"
logs = sorted(glob.glob("docs/logs/2026-11-28_h200x2_s25_issue26_part*.log"))

measured = collections.defaultdict(dict)
for f in logs:
    for line in open(f):
        m = re.search(r"eval\s+\[\d+/\d+\] passed\s+([\d.]+) ms, [\d.]+x eager\s+(\S+)", line)
        if m:
            name = m.group(2)
            measured[name.split("_")[0]][name] = float(m.group(1))

rows = []
for num, times in sorted(measured.items(), key=lambda kv: int(kv[0])):
    path = next(kb.glob(f"{num}_*.py"))
    ref = load(str(path), None, None, None, ())
    g = graph(str(path), None, None, None, ())
    w = Workload(str(path), int(ref.input.shape[0]), int(ref.input.shape[-1]), g.out_features, ())
    specs = {Spec(w, v).name(): Spec(w, v) for v in search.enumerate_variants(w)}
    pred = {n: search.predicted_ms(specs[n], SMS) for n in times if n in specs}
    if not pred:
        continue
    best_m, best_p = min(times[n] for n in pred), min(pred.values())
    for n in pred:
        rows.append((num, n.split(f"_o{w.out_features}_")[-1], times[n] / best_m, pred[n] / best_p,
                     times[n], pred[n]))

by_variant = collections.defaultdict(list)
for num, v, m, p, ms, pms in rows:
    by_variant[re.sub(r"_f\d", "", v)].append(ms / pms)
print("measured / predicted ms, by variant (all files):")
for v, r in sorted(by_variant.items(), key=lambda kv: sorted(kv[1])[len(kv[1]) // 2]):
    r.sort()
    print(f"  {v:44s} n={len(r):2d} median {r[len(r) // 2]:.3f} range {r[0]:.3f}-{r[-1]:.3f}")
print(f"\nfiles where the measured best is not within {search.PRUNE_FACTOR}x of the model's best:")
for num, v, m, p, ms, pms in rows:
    if m == 1.0 and p > search.PRUNE_FACTOR:
        print(f"  {num} {v}: predicted {p:.2f}x the model's best")
kept = sum(1 for r in rows if r[3] <= search.PRUNE_FACTOR)
print(f"\ncandidates within {search.PRUNE_FACTOR}x of the model's best: {kept} of {len(rows)}")

# The prune itself, per file: the tier's live specs as the search had them (the maths its log
# shows candidates of, with the fp32-accurate ones), what the model keeps now, and whether that
# keeps the measured winner and everything within 5 % of it. (Not simulated: the search's
# keep_eagers_rounding, which takes cuBLAS fp32 back for an ill-conditioned module: 14.)
print("\nper file: candidates measured in session 25 -> kept now; the winner and those within 5 % kept?")
attempted = collections.defaultdict(set)
for f in logs:
    for line in open(f):
        m = re.search(r"eval\s+\[\d+/(\d+)\] \w+\s.*?(\d+_\S+)$", line.strip())
        if m:
            attempted[m.group(2).split("_")[0]].add(m.group(2))
total_before = total_after = 0
for num in sorted(attempted, key=int):
    path = next(kb.glob(f"{num}_*.py"))
    ref = load(str(path), None, None, None, ())
    g = graph(str(path), None, None, None, ())
    w = Workload(str(path), int(ref.input.shape[0]), int(ref.input.shape[-1]), g.out_features, ())
    specs = [Spec(w, v) for v in search.enumerate_variants(w)]
    names = {s.name(): s for s in specs}
    maths = {names[n].math for n in attempted[num] if n in names} | set(search.FP32_ACCURATE_MATHS)
    live = [s for s in specs if s.math in maths]
    admissible = {1e-4: maths}
    dropped = search.prune(live, admissible, SMS)
    kept = {s.name() for s in live if s not in dropped}
    times = measured.get(num, {})
    best = min(times.values()) if times else None
    near = {n for n, ms in times.items() if best and ms <= 1.05 * best}
    missing = near - kept
    total_before += len(attempted[num])
    total_after += len(kept & attempted[num]) + len(kept - attempted[num])
    print(f"  {num:>3}: {len(attempted[num]):2d} -> {len(kept):2d}"
          + (f"  MISSING {sorted(missing)}" if missing else "")
          + (f"  new {sorted(kept - attempted[num])}" if kept - attempted[num] else ""))
print(f"in all: {total_before} -> {total_after}")
