"""Session 27: why validate()'s collections still take ~0.1 s each in the search's worker after
validate.thaw() (session 27's first call: 0.9 s of gc per evaluation, 2.0 s per full
validation). With kgen's own_the_heap (the worker's claim) in
place, the collections should be ~0 s. Logs every gc.freeze / gc.unfreeze with its caller, the freeze count at process
start, and each collection of one evaluation with the freeze count it saw.

    python3 docs/experiments/s27/probe_freeze.py FILE
"""
import gc
import sys
import time
import traceback

print("at start: freeze count", gc.get_freeze_count(), "tracked", len(gc.get_objects()),
      "callbacks", gc.callbacks, "python", sys.version.split()[0], flush=True)
_freeze, _unfreeze, _collect = gc.freeze, gc.unfreeze, gc.collect


def where():
    return " <- ".join(f"{fr.filename.rsplit('/', 2)[-1]}:{fr.lineno} {fr.name}"
                       for fr in traceback.extract_stack()[-5:-2][::-1])


def freeze():
    before = gc.get_freeze_count()
    _freeze()
    print(f"  gc.freeze: {before} -> {gc.get_freeze_count()}  [{where()}]", flush=True)


def unfreeze():
    before = gc.get_freeze_count()
    _unfreeze()
    print(f"  gc.unfreeze: {before} -> 0  [{where()}]", flush=True)


calls = []


def collect(*a, **k):
    frozen = gc.get_freeze_count()
    t0 = time.perf_counter()
    n = _collect(*a, **k)
    calls.append((time.perf_counter() - t0, n, frozen, a))
    return n


gc.freeze, gc.unfreeze, gc.collect = freeze, unfreeze, collect

import torch  # noqa: E402
print("after import torch: freeze count", gc.get_freeze_count(), flush=True)
from kgen.tune import worker  # noqa: E402

worker.warm_up()
print("after warm_up: freeze count", gc.get_freeze_count(), flush=True)
worker.build(sys.argv[1])
print("after build: freeze count", gc.get_freeze_count(), flush=True)
for i in range(2):
    calls.clear()
    t0 = time.perf_counter()
    r = worker.evaluate_one(sys.argv[1], [1e-4], None, 30)
    print(f"evaluate_one #{i + 1}: {time.perf_counter() - t0:.2f} s {r['status']}; freeze count after "
          f"{gc.get_freeze_count()}; {len(calls)} collections, {sum(c[0] for c in calls):.3f} s")
    for dt, n, frozen, a in calls:
        print(f"  collect{a} {dt:.3f} s, found {n}, freeze count {frozen}")

# The count after a thaw and a collection, and a full freeze's effect on a collection's time.
_unfreeze(); print("thawed:", gc.get_freeze_count())
t0 = time.perf_counter(); _collect(); print(f"collect {time.perf_counter() - t0:.3f} s; then freeze count", gc.get_freeze_count())
_freeze(); print("frozen:", gc.get_freeze_count())
for i in range(3):
    t0 = time.perf_counter(); _collect(); print(f"collect {time.perf_counter() - t0:.4f} s; then freeze count", gc.get_freeze_count())
