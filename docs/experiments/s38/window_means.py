"""Session 38, call C: the pooled weight's means (rewrite.pool_as_weight) timed on the GPU, each
way torch can write them, for KernelBench 98's W (8192 x 8192, windows of 16 rows): forward, and
forward + backward (the gradient of W through them, as a training step takes it); each mean's
max error against fp64's, in units of the dtype's rounding of the largest mean.

    PYTHONPATH=. python3 docs/experiments/s38/window_means.py
"""

import statistics

import torch

N, K, k = 8192, 8192, 16
WAYS = {
    "unfold.sum(f64).div.to (call B)": lambda w: w.unfold(0, k, k).sum(-1, dtype=torch.float64).div(k).to(w.dtype),
    "unfold.mean(-1)": lambda w: w.unfold(0, k, k).mean(-1),
    "unfold.sum(-1, f32).div.to": lambda w: w.unfold(0, k, k).sum(-1, dtype=torch.float32).div(k).to(w.dtype),
    "unflatten.mean(1)": lambda w: w.unflatten(0, (-1, k)).mean(1),
    "unflatten.sum(1, f32).div.to": lambda w: w.unflatten(0, (-1, k)).sum(1, dtype=torch.float32).div(k).to(w.dtype),
    "unflatten.sum(1, f64).div.to": lambda w: w.unflatten(0, (-1, k)).sum(1, dtype=torch.float64).div(k).to(w.dtype),
}


def timed(fn, calls=30):
    times = []
    for _ in range(calls + 3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times[3:])


torch.manual_seed(0)
base = torch.randn(N, K, device="cuda") / K ** 0.5
exact = base.double().unflatten(0, (-1, k)).mean(1)
print(torch.cuda.get_device_name(), f"W {N} x {K}, windows of {k}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    w = base.to(dtype).requires_grad_()
    want = w.detach().double().unflatten(0, (-1, k)).mean(1)
    ulp = torch.finfo(dtype).eps * want.abs().max().item()
    g = torch.randn(N // k, K, device="cuda", dtype=dtype)
    for name, way in WAYS.items():
        with torch.no_grad():
            err = (way(w).double() - want).abs().max().item() / ulp
            fwd = timed(lambda: way(w))

        def step():
            w.grad = None
            way(w).backward(g)
        both = timed(step)
        print(f"{str(dtype)[6:]:9s} {name:34s} forward {fwd:.3f} ms  forward+backward {both:.3f} ms  "
              f"max error {err:.2f} x eps of the largest mean")
