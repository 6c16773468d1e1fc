"""Session 39: one training step of eager and of emitted files, interleaved (ROUNDS rounds; in each
every model runs STEPS steps, the models' order rotating), because a step that is mostly the host's
time swings between runs with the host's state (calls A-C: eager's own step 0.70-0.97 ms between
rounds). Per model: the median synchronized wall time of a step, the host's time to queue it, the
main thread's CPU time for it (time.thread_time), each with p20-p80 over all steps.

    PYTHONPATH=. python3 docs/experiments/s39/step_ab.py REF.py {fp32,bf16,fp16} FILE.py [FILE.py ...]
"""
import statistics
import sys
import time

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import models_of, step_of  # noqa: E402

ROUNDS, STEPS = 15, 20


def quantiles(values):
    q = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.3f} ({q[1]:.3f}-{q[7]:.3f})"


def main(ref_path, dtype_name, *paths):
    models, x, g = models_of(ref_path, dtype_name, paths)
    steps = {name: step_of(model, g) for name, model in models.items()}
    for step in steps.values():
        for _ in range(10):
            step(x)
    torch.cuda.synchronize()
    walls = {name: [] for name in models}
    queued = {name: [] for name in models}
    cpu = {name: [] for name in models}
    names = list(models)
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            step = steps[name]
            step(x)
            torch.cuda.synchronize()
            for _ in range(STEPS):
                t0, c0 = time.perf_counter(), time.thread_time()
                step(x)
                t1, c1 = time.perf_counter(), time.thread_time()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                walls[name].append((t2 - t0) * 1e3)
                queued[name].append((t1 - t0) * 1e3)
                cpu[name].append((c1 - c0) * 1e3)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}; {ROUNDS} rounds of {STEPS} steps, interleaved")
    base = statistics.median(walls["eager"])
    for name in names:
        print(f"{name:28s} wall {quantiles(walls[name])} ms = {statistics.median(walls[name]) / base:.3f}x eager's; "
              f"host queues it in {quantiles(queued[name])}; thread CPU {quantiles(cpu[name])}")


if __name__ == "__main__":
    main(*sys.argv[1:])
