"""Session 41: one bf16 / fp16 training step of eager and of an emitted file through its C++ autograd
node and through its Python node (KGEN_PYTHON_AUTOGRAD=1, set for that model's steps only),
interleaved as s39/step_ab.py does (ROUNDS rounds; in each every model runs STEPS steps, the
order rotating). Per model: the median synchronized wall time of a step, the host's time to queue
it, the main thread's CPU time, each with p20-p80; then the first build of the C++ node.

    PYTHONPATH=. python3 docs/experiments/s41/native_ab.py REF.py {bf16,fp16} FILE.py
"""
import os
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


def main(ref_path, dtype_name, path):
    t0 = time.perf_counter()
    models, x, g = models_of(ref_path, dtype_name, [path])
    name = path.rsplit("/", 1)[-1]
    step = step_of(models[name], g)
    step(x)
    torch.cuda.synchronize()
    print(f"first step of the file (builds its kernels and the C++ node where not cached): {time.perf_counter() - t0:.1f} s")
    steps = {"eager": (step_of(models["eager"], g), None), "C++ node": (step, "0"), "Python node": (step, "1")}
    for fn, env in steps.values():
        os.environ["KGEN_PYTHON_AUTOGRAD"] = env or "0"
        for _ in range(10):
            fn(x)
    torch.cuda.synchronize()
    walls, queued, cpu = ({n: [] for n in steps} for _ in range(3))
    names = list(steps)
    for r in range(ROUNDS):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn, env = steps[n]
            os.environ["KGEN_PYTHON_AUTOGRAD"] = env or "0"
            fn(x)
            torch.cuda.synchronize()
            for _ in range(STEPS):
                t0, c0 = time.perf_counter(), time.thread_time()
                fn(x)
                t1, c1 = time.perf_counter(), time.thread_time()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                walls[n].append((t2 - t0) * 1e3)
                queued[n].append((t1 - t0) * 1e3)
                cpu[n].append((c1 - c0) * 1e3)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}; {ROUNDS} rounds of {STEPS} steps, interleaved")
    base = statistics.median(walls["eager"])
    for n in names:
        print(f"{n:12s} wall {quantiles(walls[n])} ms = {statistics.median(walls[n]) / base:.3f}x eager's; "
              f"host queues it in {quantiles(queued[n])}; thread CPU {quantiles(cpu[n])}")


if __name__ == "__main__":
    main(*sys.argv[1:])
