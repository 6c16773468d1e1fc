"""Where one candidate's evaluation in a search goes (issue 25: the main job's cold time): the
file's load and build, each check of the quick validation tier, and the timing, each timed with
the GPU synchronized. Runs the evaluation twice in one process (the second is what every
candidate after the first costs a search's GPU worker), then times the full tier's checks once.

    PYTHONPATH=. python3 docs/experiments/s10/candidate_phases.py FILE [REF]
"""
import sys
import time

import torch

from kgen.check import validate as v
from kgen.check.bench import bench
from kgen.check.loading import EmittedFile


def timed(label, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    print(f"  {time.perf_counter() - t0:7.2f} s  {label}", flush=True)
    return out


def main(path, ref=None):
    device = torch.device("cuda")
    for round_ in (1, 2):
        print(f"round {round_}")
        f = timed("EmittedFile (loads the file and traces its reference)",
                  lambda: EmittedFile(path, ref=ref))
        timed("build (the extension; cached after the first)", lambda: f.build(torch.float32))
        batch = f.spec.batch
        total = time.perf_counter()
        for name, run in v.checks(f, 1e-4, True, batch, device):
            r = timed(f"quick check: {name}", run)
            if not r.passed:
                print(f"           failed: {r.detail[:200]}")
        print(f"  {time.perf_counter() - total:7.2f} s  the quick tier")
        timed("bench (eager fp32, TF32 and the file, 30 iterations)", lambda: bench(f, batch=batch, iters=30))
    print("the full tier (kgen validate), once")
    total = time.perf_counter()
    for name, run in v.checks(f, 1e-4, False, batch, device):
        r = timed(f"check: {name}", run)
        if not r.passed:
            print(f"           failed: {r.detail[:200]}")
    print(f"  {time.perf_counter() - total:7.2f} s  the full tier")


if __name__ == "__main__":
    main(*sys.argv[1:])
