"""Session 38, call E: the backward of the pooled weight's means (rewrite.pool_as_weight), which
call D found makes a 16-bit training step of KernelBench 98 1.6-2.0x eager's. Each way of writing
the means, timed forward alone and forward + backward (W's gradient through them), W 8192 x 8192,
windows of 16.

    PYTHONPATH=. python3 docs/experiments/s38/means_backward.py
"""

import statistics

import torch

N, K, k = 8192, 8192, 16


class Means(torch.autograd.Function):
    """The means with the backward written out: one expand of g / k, materialized once."""

    @staticmethod
    def forward(ctx, w):
        ctx.rows = w.shape[0]
        return w.unflatten(0, (-1, k)).mean(1)

    @staticmethod
    def backward(ctx, g):
        return (g / k).unsqueeze(1).expand(-1, k, -1).reshape(ctx.rows, -1)


WAYS = {
    "sliced unflatten.mean(1) (committed)": lambda w: w[:w.shape[0] // k * k].unflatten(0, (-1, k)).mean(1),
    "unflatten.mean(1)": lambda w: w.unflatten(0, (-1, k)).mean(1),
    "unflatten.sum(1).div(k)": lambda w: w.unflatten(0, (-1, k)).sum(1).div(k),
    "view.mean(1) (w.view)": lambda w: w.view(-1, k, w.shape[1]).mean(1),
    "autograd.Function": Means.apply,
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
print(torch.cuda.get_device_name(), f"W {N} x {K}, windows of {k}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    w = base.to(dtype).detach().requires_grad_()   # (a leaf in every dtype: base.to(fp32) is base)
    g = torch.randn(N // k, K, device="cuda", dtype=dtype)
    want = None
    for name, way in WAYS.items():
        with torch.no_grad():
            fwd = timed(lambda: way(w))
        w.grad = None
        way(w).backward(g)
        grad = w.grad.clone()
        want = grad if want is None else want

        def step():
            w.grad = None
            way(w).backward(g)
        both = timed(step)
        print(f"{str(dtype)[6:]:9s} {name:38s} forward {fwd:.3f} ms  forward+backward {both:.3f} ms  "
              f"grad == committed's: {torch.equal(grad, want)}")
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        for _ in range(3):
            w.grad = None
            WAYS["sliced unflatten.mean(1) (committed)"](w).backward(g)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
