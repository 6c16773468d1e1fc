"""Session 39: where a training step's host time goes, by Python function (cProfile), for eager
and emitted files of one KernelBench module in one dtype. Per model: the host's time to queue a
step and the synchronized wall time (no profiler), then cProfile over STEPS steps, the functions
by their own time and by cumulative time.

    PYTHONPATH=. python3 docs/experiments/s39/step_host.py REF.py {fp32,bf16,fp16} FILE.py [FILE.py ...]
"""
import cProfile
import io
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import models_of, step_of  # noqa: E402

STEPS = 300


def main(ref_path, dtype_name, *paths):
    models, x, g = models_of(ref_path, dtype_name, paths)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}")
    for name, model in models.items():
        step = step_of(model, g)
        for _ in range(20):
            step(x)
        torch.cuda.synchronize()
        walls, queued = [], []
        for _ in range(50):
            t0 = time.perf_counter()
            step(x)
            queued.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(STEPS):
            step(x)
        torch.cuda.synchronize()
        profiler.disable()
        print(f"== {name}: wall {statistics.median(walls):.3f} ms a step (synchronized), host queues it in "
              f"{statistics.median(queued):.3f} ms")
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main(*sys.argv[1:])
