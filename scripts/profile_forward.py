"""Per-kernel GPU time of emitted files' forward passes (torch.profiler), to see where a
variant's time goes: e.g. what a fused statistics epilogue costs against the pass it saves.

    python scripts/profile_forward.py generated/<file>.py [more files] [--batch B] [--iters N]
                                      [--dtype bf16] [--eager]

--dtype runs the module in bf16 / fp16 (module.to(dtype), as KernelBench's eval at that
precision); --eager profiles the reference module the same way after each file. The forwards run
under torch.no_grad(), as KernelBench and `kgen bench` time them; --grad records autograd (a
training forward: kgen's parts then keep z for the backward).
"""

from __future__ import annotations

import argparse
import collections
import contextlib

import torch

from kgen.check.loading import EmittedFile


def profile(path: str, batch: int | None, iters: int, dtype: torch.dtype, eager: bool, grad: bool) -> None:
    f = EmittedFile(path)
    f.build(dtype)
    x = torch.randn(batch or f.spec.batch, f.spec.in_features, device="cuda", dtype=dtype)
    torch.manual_seed(0)
    with contextlib.nullcontext() if grad else torch.no_grad():
        _profile(f"{f.path.name} ({str(dtype)[6:]})", f.ModelNew(*f.init_args()).cuda().to(dtype).train(), x, iters)
        if eager:
            torch.manual_seed(0)
            _profile(f"eager reference ({str(dtype)[6:]})", f.Model(*f.init_args()).cuda().to(dtype).train(), x, iters)


def kernel_times(model, x, iters: int) -> dict[str, float]:
    """GPU time of each kernel per call of model(x) (microseconds, by kernel name), after three
    calls of warm-up."""
    for _ in range(3):
        model(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            model(x)
        torch.cuda.synchronize()
    totals: dict[str, float] = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] += e.device_time / iters
    return dict(totals)


def _profile(what: str, model, x, iters: int) -> None:
    totals = kernel_times(model, x, iters)
    print(f"== {what}: {sum(totals.values()) / 1e3:.3f} ms of kernels per forward")
    for name, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {us / 1e3:8.3f} ms  {name[:110]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--eager", action="store_true", help="profile the reference module too")
    ap.add_argument("--grad", action="store_true", help="record autograd (default: under torch.no_grad())")
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    for path in a.files:
        profile(path, a.batch, a.iters, dtype, a.eager, a.grad)


if __name__ == "__main__":
    main()
