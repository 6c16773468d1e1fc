"""Per-kernel GPU time of emitted files' forward passes (torch.profiler), to see where a
variant's time goes: e.g. what a fused statistics epilogue costs against the pass it saves.

    python scripts/profile_forward.py generated/<file>.py [more files] [--batch B] [--iters N]
"""

from __future__ import annotations

import argparse
import collections

import torch

from kgen.check.loading import EmittedFile


def profile(path: str, batch: int | None, iters: int) -> None:
    f = EmittedFile(path)
    f.build()
    torch.manual_seed(0)
    model = f.ModelNew(*f.init_args()).cuda().train()
    x = torch.randn(batch or f.spec.batch, f.spec.in_features, device="cuda")
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
    print(f"== {f.path.name}: {sum(totals.values()) / 1e3:.3f} ms of kernels per forward")
    for name, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {us / 1e3:8.3f} ms  {name[:110]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    for path in a.files:
        profile(path, a.batch, a.iters)


if __name__ == "__main__":
    main()
