"""Session 39: ways to write the gradient of windowed means, dW[j*k + i] = dW'[j] / k, with torch's
ops (W 8192 x 8192, windows of 16, dW' 512 x 8192): each timed alone (CUDA events, median of 30),
and checked equal to the first.

    PYTHONPATH=. python3 docs/experiments/s39/expand_ways.py
"""
import statistics

import torch

N, K, k = 8192, 8192, 16

WAYS = {
    "expand.reshape": lambda g: (g / k).unsqueeze(1).expand(-1, k, -1).reshape(N, K),
    "stack": lambda g: torch.stack([g / k] * k, 1).view(N, K),
    "repeat(1, k).view": lambda g: (g / k).repeat(1, k).view(N, K),
    "empty.copy_": lambda g: torch.empty(N // k, k, K, device=g.device, dtype=g.dtype).copy_((g / k).unsqueeze(1)).view(N, K),
    "index_select": lambda g, idx=None: (g / k).index_select(0, torch.arange(N, device=g.device) // k),
    "repeat_interleave(out)": lambda g: (g / k).repeat_interleave(k, 0, output_size=N),
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


print(torch.cuda.get_device_name(), f"dW {N} x {K} from dW' {N // k} x {K}")
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    g = torch.randn(N // k, K, device="cuda").to(dtype)
    want = None
    for name, way in WAYS.items():
        out = way(g)
        want = out if want is None else want
        ms = timed(lambda: way(g))
        gbs = out.numel() * out.element_size() / ms / 1e6
        print(f"{str(dtype)[6:]:9s} {name:24s} {ms:.3f} ms  ({gbs:.0f} GB/s written)  equal: {torch.equal(out, want)}")
