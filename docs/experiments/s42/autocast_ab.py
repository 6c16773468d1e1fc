"""Session 42: an fp32 module inside torch.autocast, eager against an emitted file, which now
computes there in autocast's dtype (x, W and the parameters converted per call, as eager's
Linear does; the output in eager's dtype). Interleaved as s41/native_ab.py: ROUNDS rounds, in each
every case runs CALLS synchronized calls, the order rotating; median wall ms with p20-p80.
Cases: inference (no_grad) and one training step (forward + backward of a fixed output
gradient, x wanting its gradient: an inner layer), each eager and kgen under autocast, and kgen
without autocast (its fp32-exact kernels: what a file computed under autocast before) for
reference; then each output's and x's gradient's max abs error against the fp64 module.

    PYTHONPATH=. python3 docs/experiments/s42/autocast_ab.py REF.py FILE.py [bf16|fp16] [eval|train]

(Session 43 added the mode: `train` runs the modules in training mode, a BatchNorm on batch
statistics updating its running buffers, which the build for autocast now keeps in fp32; the
default, eval, is what session 42 measured.)
"""
import contextlib
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import load  # noqa: E402

ROUNDS, CALLS = 11, 20
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def quantiles(values):
    q = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.3f} ({q[1]:.3f}-{q[7]:.3f})"


def main(ref_path, path, dtype_name="bf16", mode="eval"):
    low = DTYPES[dtype_name]
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
        new = load(path)["ModelNew"](*init)
        exact = ref["Model"](*init).double()
    new.load_state_dict(eager.state_dict())
    exact.load_state_dict(eager.state_dict())
    for m in (eager, new, exact):
        m.train(mode == "train")
    torch.manual_seed(1)
    x = ref["get_inputs"]()[0].cuda()
    xg = x.clone().requires_grad_()
    g = torch.randn(eager(x).shape, device="cuda")

    def autocast(on):
        return torch.autocast("cuda", dtype=low) if on else contextlib.nullcontext()

    def infer(model, on):
        def call():
            with torch.no_grad(), autocast(on):
                model(x)
        return call

    def step(model, on):
        params = list(model.parameters())

        def call():
            for p in params:
                p.grad = None
            xg.grad = None
            with autocast(on):
                out = model(xg)
            out.backward(g.to(out.dtype))
        return call

    cases = {"eager autocast": infer(eager, True), "kgen autocast": infer(new, True),
             "kgen fp32 (before)": infer(new, False),
             "eager autocast step": step(eager, True), "kgen autocast step": step(new, True),
             "kgen fp32 step (before)": step(new, False)}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in cases.values():
            for _ in range(5):
                fn()
    torch.cuda.synchronize()
    print(f"first calls (builds where not cached): {time.perf_counter() - t0:.1f} s")
    walls = {n: [] for n in cases}
    names = list(cases)
    for r in range(ROUNDS):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn = cases[n]
            fn()
            torch.cuda.synchronize()
            for _ in range(CALLS):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                walls[n].append((time.perf_counter() - t0) * 1e3)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; autocast {dtype_name}; {mode} mode; x {tuple(x.shape)}; "
          f"{ROUNDS} rounds of {CALLS} calls, interleaved")
    for n in names:
        base = statistics.median(walls["eager autocast step" if "step" in n else "eager autocast"])
        print(f"{n:24s} {quantiles(walls[n])} ms = {statistics.median(walls[n]) / base:.3f}x eager autocast's")
    x64 = x.double().requires_grad_()
    out64 = exact(x64)
    out64.backward(g.double())
    for name, model, on in (("eager autocast", eager, True), ("kgen autocast", new, True), ("kgen fp32", new, False)):
        xi = x.clone().requires_grad_()
        with autocast(on):
            out = model(xi)
        out.backward(g.to(out.dtype))
        print(f"{name:16s} output {out.dtype}, max abs error vs fp64 {(out.double() - out64).abs().max().item():.3e}; "
              f"dL/dx {(xi.grad.double() - x64.grad).abs().max().item():.3e}")


if __name__ == "__main__":
    main(*sys.argv[1:])
