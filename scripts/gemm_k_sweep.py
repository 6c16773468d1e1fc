"""The GEMM kernel's time of a module's emitted files against K (in_features), beside eager's
GEMM kernel at the same shapes, and a least-squares line through each: the slope is the
mainloop's rate, the intercept what each wave of tiles costs around it (launch, prologue,
pipeline fill, epilogue). How session 30 found the 16-bit GEMM's epilogue (docs/perf.md).

    PYTHONPATH=. python3 scripts/gemm_k_sweep.py REF.py [--dtype bf16] [--k 64 512 2048 8192]
                                                 [--batch B] [--out N] [--iters 20]

Each K gets `kgen generate REF --in K` (the default variant for the target, with --batch /
--out where given), built and profiled under torch.no_grad() (scripts/profile_forward.py); the
GEMM kernel is the longest of each forward.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from click.testing import CliRunner

from kgen.check.loading import EmittedFile
from kgen.cli import main as kgen_main
from profile_forward import kernel_times


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys against xs (at least two distinct xs)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        raise ValueError("a line needs at least two distinct points")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def longest(times: dict[str, float]) -> tuple[str, float]:
    name = max(times, key=times.get)
    return name, times[name]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--k", type=int, nargs="+", default=[64, 512, 2048, 8192])
    ap.add_argument("--batch", type=int)
    ap.add_argument("--out", type=int)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for k in a.k:
            path = Path(d) / f"k{k}.py"
            args = ["generate", a.ref, "--in", str(k), "--dtype", a.dtype, "-o", str(path), "--force"]
            args += ["--batch", str(a.batch)] if a.batch else []
            args += ["--out", str(a.out)] if a.out else []
            r = CliRunner().invoke(kgen_main, args)
            if r.exit_code != 0:
                raise SystemExit(f"kgen generate at K = {k} failed:\n{r.output}")
            f = EmittedFile(path)
            f.build(dtype)
            x = torch.randn(a.batch or f.spec.batch, k, device="cuda", dtype=dtype)
            with torch.no_grad():
                torch.manual_seed(0)
                ours = longest(kernel_times(f.ModelNew(*f.init_args()).cuda().to(dtype), x, a.iters))
                torch.manual_seed(0)
                eager = longest(kernel_times(f.Model(*f.init_args()).cuda().to(dtype), x, a.iters))
            rows.append((k, ours, eager))
            print(f"K = {k:6d}: kgen {ours[1] / 1e3:.4f} ms ({ours[0][:60]}), eager {eager[1] / 1e3:.4f} ms ({eager[0][:60]})",
                  flush=True)
    ks = [float(k) for k, _, _ in rows]
    for label, i in (("kgen", 1), ("eager", 2)):
        intercept, slope = fit_line(ks, [row[i][1] / 1e3 for row in rows])
        print(f"{label:5s}: {intercept:.4f} ms + {slope * 1024:.4f} ms per 1024 of K")


if __name__ == "__main__":
    main()
