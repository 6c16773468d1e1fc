"""Why a collection inside validate() takes ~0.12 s on the GPU host although validate() freezes
what was alive before the checks (session 26's profile: 10 collections, 1.25 s of a 2.6 s
evaluation, the GPU's queued work waited for apart). Prints the freeze count the worker sees,
the tracked objects, and each collection of one quick validation timed with the objects it
found, its generation's sizes before it, and the time of the frees that follow (gc.callbacks).

    python3 docs/experiments/s26/probe_gc.py FILE
"""
import gc
import sys
import time

import torch

from kgen.tune import worker

calls = []
_collect = gc.collect
phase = {}


def callback(ph, info):
    phase[ph] = time.perf_counter()
    if ph == "stop":
        phase["info"] = dict(info)


def timed_collect(*a, **k):
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    counts = gc.get_count()
    tracked = len(gc.get_objects())
    t0 = time.perf_counter()
    n = _collect(*a, **k)
    t1 = time.perf_counter()
    calls.append((t1 - t0, n, counts, tracked, gc.get_freeze_count(),
                  phase.get("stop", t1) - phase.get("start", t0)))
    return n


def main():
    path = sys.argv[1]
    worker.warm_up()
    worker.build(path)
    print("freeze count before", gc.get_freeze_count(), "tracked", len(gc.get_objects()))
    t0 = time.perf_counter(); _collect(); print(f"a full collection: {time.perf_counter() - t0:.3f} s")
    gc.freeze()
    t0 = time.perf_counter(); _collect(); print(f"frozen, a collection: {time.perf_counter() - t0:.4f} s",
                                               "tracked", len(gc.get_objects()))
    gc.unfreeze()
    gc.callbacks.append(callback)
    gc.collect = timed_collect
    for i in range(2):
        calls.clear()
        t0 = time.perf_counter()
        worker.evaluate_one(path, [1e-4], None, 30)
        print(f"evaluate_one #{i + 1}: {time.perf_counter() - t0:.2f} s")
        for dt, n, counts, tracked, frozen, inside in calls:
            print(f"  collect {dt:.3f} s (collector {inside:.3f}), found {n}, counts {counts}, "
                  f"tracked {tracked}, freeze count {frozen}")
        worker.release_memory()


if __name__ == "__main__":
    main()
