"""The kgen command line: generate, validate, bench, search."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from . import __version__, generator
from .problems import PROBLEMS, get_problem
from .spec import (ARCH_LIMITS, BACKENDS, FUSION_LEVELS, MATH_MODES, Spec, SpecError, Tile,
                   arch_for_capability, gemm_family)

# Default tiles per GEMM family. SIMT: the fastest measured (docs/perf.md). MMA: a tile valid
# for every math mode and covered by the GPU tests; `kgen search` finds faster ones per shape.
DEFAULT_TILES = {
    "simt": Tile(128, 128, 8, 64, 64, tm=8, tn=16, group_m=8),
    "mma": Tile(128, 128, 32, 64, 32, stages=3, group_m=8),  # valid for every math mode
    "wgmma": Tile(128, 128, 32, 16, 128, stages=4, group_m=8),  # valid for tf32x3 and tf32
}


def _dims(text: str | None, n: int, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != n or not all(p.isdigit() for p in parts):
        raise click.BadParameter(f"expected {what} like {'x'.join(['128'] * n)}, got {text!r}")
    return tuple(int(p) for p in parts)


def _require_cuda(what: str):
    import torch

    if not torch.cuda.is_available():
        click.echo(f"kgen {what} needs a CUDA GPU, and torch sees none on this machine "
                   f"(torch {torch.__version__}). Generate files here with `kgen generate`; "
                   f"run {what} where a GPU is.", err=True)
        sys.exit(2)


def problem_option(f):
    return click.option("--problem", type=click.Choice(sorted(PROBLEMS)), default="gemm_scale_bn",
                        show_default=True, help="Reference module to replace.")(f)


def shape_options(f):
    f = click.option("--batch", type=click.IntRange(min=1), default=None,
                     help="Batch size to tune and measure at [problem default; any batch works at run time].")(f)
    f = click.option("--out", "out_features", type=click.IntRange(min=1), default=None,
                     help="out_features [problem default].")(f)
    f = click.option("--in", "in_features", type=click.IntRange(min=1), default=None,
                     help="in_features [problem default].")(f)
    return f


def _shape(problem, batch, in_features, out_features):
    p = get_problem(problem)
    return batch or p.default_batch, in_features or p.default_in, out_features or p.default_out


@click.group()
@click.version_option(__version__, prog_name="kgen")
def main():
    """kgen: synthesize fused CUDA ModelNew files for PyTorch reference modules."""


@main.command()
@problem_option
@shape_options
@click.option("--math", type=click.Choice(MATH_MODES), default="fp32_simt", show_default=True,
              help="GEMM arithmetic: fp32 FFMA, 3xTF32 (fp32-accurate tensor cores), TF32 or BF16.")
@click.option("--backend", type=click.Choice(BACKENDS), default="kgen", show_default=True,
              help="kgen's portable GEMM kernels (sm_80+), kgen's Hopper wgmma GEMM (sm_90a; tf32x3, "
                   "tf32), or cuBLAS with kgen's BatchNorm kernels.")
@click.option("--fusion", type=click.Choice([str(k) for k in FUSION_LEVELS]), default=None,
              help="1: separate statistics pass; 2: statistics fused into the GEMM [2; 1 for cuBLAS].")
@click.option("--tile", help="CTA tile BMxBNxBK, e.g. 128x128x32.")
@click.option("--warp", help="Warp tile WMxWN, e.g. 64x32 [wgmma: 16xBN].")
@click.option("--thread", help="SIMT thread tile TMxTN, e.g. 8x8.")
@click.option("--stages", type=click.IntRange(min=2), help="Tensor-core pipeline stages.")
@click.option("--group", type=click.IntRange(min=1), help="Raster group (tile rows sharing L2).")
@click.option("--arch", type=click.Choice(sorted(ARCH_LIMITS)), default="sm_90a", show_default=True,
              help="Target whose limits the tile must fit.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Output file [generated/<name>.py].")
def generate(problem, batch, in_features, out_features, math, backend, fusion, tile, warp, thread,
             stages, group, arch, output):
    """Write a ModelNew file for one spec. Needs no GPU."""
    batch, in_features, out_features = _shape(problem, batch, in_features, out_features)
    family = gemm_family(backend, math)
    spec_tile = None
    if family != "cublas":
        d = DEFAULT_TILES[family]
        bm, bn, bk = _dims(tile, 3, "--tile") or (d.bm, d.bn, d.bk)
        # A wgmma warpgroup's 4 warps own 16 rows x BN each, so that warp tile follows the tile.
        wm, wn = _dims(warp, 2, "--warp") or ((16, bn) if family == "wgmma" else (d.wm, d.wn))
        tm, tn = (_dims(thread, 2, "--thread") or (d.tm, d.tn)) if family == "simt" else (0, 0)
        spec_tile = Tile(bm, bn, bk, wm, wn, tm=tm, tn=tn,
                         stages=(stages or d.stages) if family != "simt" else 0,
                         group_m=group or d.group_m)
    elif any(v is not None for v in (tile, warp, thread, stages, group)):
        raise click.UsageError("cuBLAS chooses its own tiles: drop --tile/--warp/--thread/--stages/--group")
    fusion_level = int(fusion) if fusion else (1 if family == "cublas" else 2)
    try:
        spec = Spec(problem, batch, in_features, out_features, math=math, backend=backend,
                    fusion=fusion_level, tile=spec_tile, arch=arch)
    except SpecError as e:
        raise click.UsageError(str(e)) from None
    path = generator.write(spec, output)
    click.echo(f"wrote {path}  ({spec.name()}, key {spec.key()})")


def _load(file):
    from .loading import EmittedFile

    try:
        return EmittedFile(file)
    except (ValueError, FileNotFoundError, SyntaxError) as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--tol", type=float, default=1e-4, show_default=True, help="atol = rtol of torch.allclose.")
@click.option("--batch", type=click.IntRange(min=2), default=None, help="Batch size [the file's].")
@click.option("--quick", is_flag=True, help="Core numerical checks only (what a search runs first).")
def validate(file, tol, batch, quick):
    """Check FILE against its reference on the GPU; exits non-zero on any failure."""
    _require_cuda("validate")
    from .validate import validate as run_validation

    f = _load(file)
    click.echo(f"validating {file} ({f.spec.name()}) at tol {tol:g}, errors against fp64")
    results = run_validation(f, tol=tol, quick=quick, batch=batch, report=lambda r: click.echo(r.line()))
    failed = [r for r in results if not r.passed]
    click.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--batch", type=click.IntRange(min=2), default=None, help="Batch size [the file's].")
@click.option("--iters", type=click.IntRange(min=10), default=100, show_default=True, help="Timed calls.")
def bench(file, batch, iters):
    """Time FILE and the eager reference in the same run and print their ratio."""
    _require_cuda("bench")
    from .bench import bench as run_bench

    f = _load(file)
    f.build()
    click.echo(run_bench(f, batch=batch, iters=iters).report())


@main.command()
@problem_option
@shape_options
@click.option("--tol", type=float, multiple=True, help="Tolerance tier(s); one winner each [1e-4].")
@click.option("--math", "maths", type=click.Choice(MATH_MODES), multiple=True,
              help="Math modes to try [all].")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parallel builds [cores/2].")
@click.option("--iters", type=click.IntRange(min=10), default=30, show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Try only the N fastest-measured tiles of each math mode (a quick search).")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("generated"),
              show_default=True)
def search(problem, batch, in_features, out_features, tol, maths, jobs, iters, top, out_dir):
    """Build, validate and time every valid spec; write the fastest valid file per tolerance."""
    _require_cuda("search")
    import torch

    from .search import DEFAULT_MATHS, run_search

    batch, in_features, out_features = _shape(problem, batch, in_features, out_features)
    # Only what this GPU can build and run: wgmma variants on Hopper alone.
    arch = arch_for_capability(*torch.cuda.get_device_capability())
    record = run_search(problem, batch, in_features, out_features, sorted(tol or (1e-4,)),
                        maths=maths or DEFAULT_MATHS, jobs=jobs or max(1, (os.cpu_count() or 2) // 2),
                        iters=iters, top=top, out_dir=out_dir, arch=arch)
    sys.exit(0 if record["winners"] else 1)


if __name__ == "__main__":
    main()
