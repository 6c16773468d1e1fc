"""Where a warm search worker's time goes for the README's main job (issue 25, item 3): one
process as the search's worker is (worker.warm_up first, the file's extension built before),
then a candidate's evaluation twice and the winner's full validation, each under cProfile;
prints the wall time of each and the functions with the most cumulative time.

    python3 docs/experiments/s26/profile_eval.py FILE [--top N]
"""
import argparse
import cProfile
import gc
import io
import pstats
import sys
import time

import torch

from kgen.tune import worker

# gc.collect with the GPU's queued work waited for first, each part timed: whether a collection's
# seconds are the collector's or the GPU's (a tensor's free may wait for it)
GC_STATS = {"calls": 0, "sync_s": 0.0, "collect_s": 0.0, "collected": 0}
_collect = gc.collect


def timed_collect(*a, **k):
    t0 = time.perf_counter()
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    n = _collect(*a, **k)
    t2 = time.perf_counter()
    GC_STATS["calls"] += 1
    GC_STATS["sync_s"] += t1 - t0
    GC_STATS["collect_s"] += t2 - t1
    GC_STATS["collected"] += n
    return n


gc.collect = timed_collect


def profiled(label, fn, top):
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    out = fn()
    prof.disable()
    wall = time.perf_counter() - t0
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(top)
    print(f"=== {label}: {wall:.2f} s wall; gc {GC_STATS}")
    GC_STATS.update(calls=0, sync_s=0.0, collect_s=0.0, collected=0)
    print("\n".join(line[:200] for line in s.getvalue().splitlines()[6:]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--top", type=int, default=45)
    a = p.parse_args()
    t0 = time.perf_counter()
    worker.warm_up()
    print(f"=== warm_up: {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    worker.build(a.file)
    print(f"=== build (cached): {time.perf_counter() - t0:.2f} s")
    for i in range(3):
        r = profiled(f"evaluate_one #{i + 1}", lambda: worker.evaluate_one(a.file, [1e-4], None, 30), a.top)
        print("   status", r["status"], r.get("measured", {}).get("median_ms"))
        worker.release_memory()
    profiled("full_validation", lambda: worker.full_validation(a.file, 1e-4, None), a.top)


if __name__ == "__main__":
    sys.exit(main())
