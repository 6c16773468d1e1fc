"""Session 54: the host's time to queue one forward in eager training mode (parameters wanting
gradients, no backward: how KernelBench's eval times a file), for eager and an emitted file
through its C++ autograd node and through its Python node (KGEN_PYTHON_AUTOGRAD=1, set for that
model's calls only), interleaved (ROUNDS rounds; in each every model runs CALLS calls, the order
rotating), the GPU idle before each call. Median and p20-p80, us; the synchronized wall too.

    PYTHONPATH=. python3 docs/experiments/s54/forward_ab.py REF.py FILE.py
"""
import os
import statistics
import sys
import time

import torch

ROUNDS, CALLS = 15, 20


def load(path):
    ns = {"__name__": f"kgen_s54_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def quantiles(values):
    q = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.1f} ({q[1]:.1f}-{q[7]:.1f})"


def main(ref_path, path):
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
        new = load(path)["ModelNew"](*init)
    new.load_state_dict(eager.state_dict())
    x = ref["get_inputs"]()[0].cuda()
    models = {"eager": (eager, None), "C++ node": (new, "0"), "Python node": (new, "1")}
    for model, env in models.values():
        os.environ["KGEN_PYTHON_AUTOGRAD"] = env or "0"
        for _ in range(10):
            model(x)
    torch.cuda.synchronize()
    queued, walls = ({n: [] for n in models} for _ in range(2))
    names = list(models)
    for r in range(ROUNDS):
        for n in names[r % len(names):] + names[:r % len(names)]:
            model, env = models[n]
            os.environ["KGEN_PYTHON_AUTOGRAD"] = env or "0"
            for _ in range(CALLS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(x)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                queued[n].append((t1 - t0) * 1e6)
                walls[n].append((time.perf_counter() - t0) * 1e6)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {path}; fp32 forward, training mode, gradients wanted; "
          f"x {tuple(x.shape)}; {ROUNDS} rounds of {CALLS} calls, interleaved")
    for n in names:
        print(f"{n:12s} host queues it in {quantiles(queued[n])} us; synchronized wall {quantiles(walls[n])} us")


if __name__ == "__main__":
    main(*sys.argv[1:])
