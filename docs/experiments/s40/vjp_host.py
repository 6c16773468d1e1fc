"""Session 40: where the backward's host time goes on autograd's device thread. For eager and each
emitted file of one KernelBench module in one dtype, interleaved (ROUNDS rounds of STEPS steps, the
order rotating): the synchronized wall time of a step, the main thread's time in forward and in
backward() (backward() returns once the device thread has queued every node), and, for a file, the
device thread's CPU and wall time inside the part's vjp (its autograd.Function's backward, wrapped),
and the peak memory one step allocates above what is allocated when it starts.
Also eager with one identity autograd.Function (Python backward) at its output: what any Python
node costs the step. Then cProfile inside the vjp over PROFILED steps, by own and cumulative time.

    PYTHONPATH=. python3 docs/experiments/s40/vjp_host.py REF.py {fp32,bf16,fp16} FILE.py [FILE.py ...]
"""
import cProfile
import io
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import models_of  # noqa: E402

ROUNDS, STEPS, PROFILED = 12, 20, 200


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        return g


def part_functions(model):
    """The autograd.Function classes of a ModelNew's parts (from its module's _KGEN_AUTOGRAD)."""
    ns = sys.modules[type(model).__module__].__dict__ if type(model).__module__ in sys.modules else None
    if ns is None:
        ns = type(model).forward.__globals__
    out = []
    for call in ns["_KGEN_AUTOGRAD"]:
        if call is None:
            continue
        for cell in call.__closure__:
            if isinstance(cell.cell_contents, type) and issubclass(cell.cell_contents, torch.autograd.Function):
                out.append(cell.cell_contents)
    return out


class Meter:
    def __init__(self):
        self.cpu = self.wall = 0.0
        self.profiler = None

    def wrap(self, fn):
        original = fn.backward

        def backward(ctx, *grads):
            c0, t0 = time.thread_time(), time.perf_counter()
            if self.profiler is not None:
                self.profiler.enable()
            try:
                return original(ctx, *grads)
            finally:
                if self.profiler is not None:
                    self.profiler.disable()
                self.cpu += time.thread_time() - c0
                self.wall += time.perf_counter() - t0
        fn.backward = staticmethod(backward)


def q(values):
    qs = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.3f} ({qs[1]:.3f}-{qs[7]:.3f})"


def main(ref_path, dtype_name, *paths):
    models, x, g = models_of(ref_path, dtype_name, paths)
    eager = models["eager"]
    models["eager+identity"] = lambda v: Identity.apply(eager(v))
    meters = {}
    for name, model in models.items():
        if name.startswith("eager"):
            continue
        meters[name] = Meter()
        for fn in part_functions(model):
            meters[name].wrap(fn)
    params = {name: list(m.parameters()) if isinstance(m, torch.nn.Module) else list(eager.parameters())
              for name, m in models.items()}
    rec = {name: {k: [] for k in ("wall", "fwd", "bwd", "vjp_cpu", "vjp_wall")} for name in models}

    def step(name, record):
        for p in params[name]:
            p.grad = None
        x.grad = None
        m = meters.get(name)
        if m:
            m.cpu = m.wall = 0.0
        t0 = time.perf_counter()
        y = models[name](x)
        t1 = time.perf_counter()
        y.backward(g)
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        if record:
            r = rec[name]
            r["wall"].append((t3 - t0) * 1e3)
            r["fwd"].append((t1 - t0) * 1e3)
            r["bwd"].append((t2 - t1) * 1e3)
            if m:
                r["vjp_cpu"].append(m.cpu * 1e3)
                r["vjp_wall"].append(m.wall * 1e3)

    names = list(models)
    for name in names:
        for _ in range(10):
            step(name, False)
    torch.cuda.synchronize()
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            step(name, False)
            torch.cuda.synchronize()
            for _ in range(STEPS):
                step(name, True)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}; "
          f"{ROUNDS} rounds of {STEPS} steps, interleaved; ms, median (p20-p80)")
    base = statistics.median(rec["eager"]["wall"])
    for name in names:
        r = rec[name]
        line = (f"{name:28s} wall {q(r['wall'])} = {statistics.median(r['wall']) / base:.3f}x eager; "
                f"forward {q(r['fwd'])}; backward() {q(r['bwd'])}")
        if r["vjp_cpu"]:
            line += f"; vjp CPU {q(r['vjp_cpu'])}, wall {q(r['vjp_wall'])}"
        print(line)
    for name in names:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(name, False)
        torch.cuda.synchronize()
        print(f"{name:28s} peak memory of a step above its start: {(torch.cuda.max_memory_allocated() - base) / 2**20:.1f} MiB")
    for name, m in meters.items():
        m.profiler = cProfile.Profile()
        for _ in range(PROFILED):
            step(name, False)
        torch.cuda.synchronize()
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(m.profiler, stream=out).sort_stats(order).print_stats(25)
            print(f"== {name}: the vjp under cProfile, {PROFILED} steps, by {order}")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:5000])
        m.profiler = None


if __name__ == "__main__":
    main(*sys.argv[1:])
