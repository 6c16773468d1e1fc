"""The kgen command line: generate, validate, bench, search."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import click

from kgen import __version__
from kgen.codegen import generator
from kgen.ir.graph import Unsupported
from kgen.frontend.problems import PROBLEMS, is_path
from kgen.frontend.reference import Reference, ReferenceError
from kgen.tune.spec import (WGMMA_ARCH, ARCH_LIMITS, BACKENDS, FUSION_LEVELS, MATH_MODES, WGMMA_MATHS, Spec, SpecError,
                   Tile, Variant, Workload, arch_for_capability, check_shape, gemm_family)
from kgen.check.static_checks import StaticCheckError
from kgen.tune.configs import (PRECISION_TOLERANCES, PRECISIONS, RELAXED_TOLERANCE, gate_tolerance, precision_name,
                                torch_dtype)

# What each backend computes when --math is not given: its fastest fp32-accurate mode.
DEFAULT_MATH = {"wgmma": "tf32x3", "kgen": "tf32x3", "cublas": "fp32_simt", "gemv": "fp32_simt"}
EXAMPLES = {"--tile": "128x128x32", "--warp": "64x32", "--thread": "8x8"}


def _dims(text: str | None, n: int, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != n or not all(p.isdigit() for p in parts):
        raise click.BadParameter(f"expected {what} like {EXAMPLES[what]}, got {text!r}", param_hint=what)
    return tuple(int(p) for p in parts)


class FeatureCount(click.ParamType):
    """A positive integer, with a pointed message when a file name is given instead (`--out
    my.py` means out_features, not the output file)."""

    name = "integer"

    def __init__(self, what: str):
        self.what = what

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            number = value
        elif str(value).strip().isdigit():
            number = int(value)
        else:
            hint = (" To name the file kgen writes, use -o/--output (search: --out-dir)."
                    if param is not None and param.name == "out_features" else "")
            self.fail(f"{self.what} must be a positive integer, got {value!r}.{hint}", param, ctx)
        if number < 1:
            self.fail(f"{self.what} must be a positive integer, got {number}", param, ctx)
        return number


class GpuCount(click.ParamType):
    """`all` (None: every visible GPU) or a positive number of GPUs."""

    name = "all|N"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip().lower()
        if text == "all":
            return None
        if text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"expected 'all' or a positive number of GPUs, got {value!r}", param, ctx)


def search_gpus(count: int | None) -> list[int]:
    """The GPUs a search measures on: the first `count` of those visible (all where None), all of
    one kind (their times are compared with each other)."""
    import torch

    visible = torch.cuda.device_count()
    if count is not None and count > visible:
        raise click.BadParameter(f"{count} GPUs asked for, {visible} visible", param_hint="--gpus")
    gpus = list(range(visible if count is None else count))
    names = {i: torch.cuda.get_device_name(i) for i in gpus}
    if len(set(names.values())) > 1:
        raise click.BadParameter(
            "the GPUs of one search must be of one kind, so that their times compare; got "
            + ", ".join(f"{i}: {n}" for i, n in names.items())
            + " (choose them with CUDA_VISIBLE_DEVICES or a smaller --gpus)", param_hint="--gpus")
    return gpus


class Tolerance(click.ParamType):
    """A tolerance (atol = rtol): a positive finite number."""

    name = "float"

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number like 1e-4, got {value!r}", param, ctx)
        if not (math.isfinite(number) and number > 0):
            self.fail(f"a tolerance must be a positive finite number, got {value!r}", param, ctx)
        return number


def _require_cuda(what: str):
    import torch

    if not torch.cuda.is_available():
        click.echo(f"kgen {what} needs a CUDA GPU, and torch sees none on this machine "
                   f"(torch {torch.__version__}). Generate files here with `kgen generate`; "
                   f"run {what} where a GPU is.", err=True)
        sys.exit(2)


def problem_option(f):
    f = click.option("--problem", type=click.Choice(sorted(PROBLEMS)), default=None,
                     help="A reference shipped with kgen, instead of REF [gemm_scale_bn].")(f)
    return click.argument("ref", required=False, type=click.Path(exists=True, dir_okay=False))(f)


def _problem(ref, problem) -> str:
    """The spec's problem: REF's absolute path or a shipped name. A module kgen cannot
    synthesize (or a file it cannot read) exits 2 with the reason."""
    from kgen.frontend.problems import graph, problem_id

    if ref and problem:
        raise click.UsageError("give either REF or --problem, not both")
    # REF is a file (click checked that it exists), whatever its name: a path, never read as a
    # shipped problem's name (`model.txt` has neither `.py` nor a slash for is_path to see).
    chosen = str(Path(ref).resolve()) if ref else problem or "gemm_scale_bn"
    try:
        chosen = problem_id(chosen)
        graph(chosen)
        if ref:
            generator.refuse_shared_names(Reference(ref))
    except (Unsupported, ReferenceError) as e:
        _refuse_module(chosen if ref else None, e)
    return chosen


def _refuse_module(problem: str | None, e: Exception):
    """A module kgen cannot synthesize (or a reference it cannot read): the reason, naming the
    file where the reason does not, and exit 2 (not a usage error: the command line was right)."""
    text = str(e)
    if problem and is_path(problem) and not text.startswith(problem):
        text = f"{problem}: {text}"
    click.echo(f"kgen: {text}", err=True)
    sys.exit(2)


def search_problem_option(f):
    """problem_option for `kgen search`, which also takes several reference files (each searched
    in turn at its own shape)."""
    f = click.option("--problem", type=click.Choice(sorted(PROBLEMS)), default=None,
                     help="A reference shipped with kgen, instead of REF [gemm_scale_bn].")(f)
    return click.argument("refs", nargs=-1, type=click.Path(exists=True, dir_okay=False))(f)


def shape_options(f):
    f = click.option("--batch", type=FeatureCount("--batch"), default=None,
                     help="Batch size to tune and measure at [problem default; any batch works at run time].")(f)
    f = click.option("--out", "out_features", type=FeatureCount("--out (out_features)"), default=None,
                     help="out_features of the (last) Linear layer [problem default]. Not the output "
                          "file: that is -o/--output (search: --out-dir).")(f)
    f = click.option("--in", "in_features", type=FeatureCount("--in (in_features)"), default=None,
                     help="in_features of the Linear layer [problem default].")(f)
    f = click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="Set a module-level constant of the reference (any name it uses), e.g. "
                          "--set hidden_size=4096; repeatable.")(f)
    return f


def _constants(sets) -> tuple:
    """--set NAME=VALUE options as the spec's sorted (name, number) pairs."""
    out = {}
    for item in sets:
        name, eq, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not eq or not name.isidentifier():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--set")
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise click.BadParameter(f"{name}: {text!r} is not a number", param_hint="--set") from None
        if not math.isfinite(value):
            raise click.BadParameter(f"{name}: {text!r} is not a finite number", param_hint="--set")
        out[name] = value
    return tuple(sorted(out.items()))


def _shape(problem, batch, in_features, out_features, sets=()):
    """(batch, in_features, out_features, constants) of the workload: the reference's own, with
    the options given mapped onto the constants that set them (what they changed is printed).
    An option that cannot apply is an error only when given."""
    from kgen.frontend.problems import graph, load

    constants = _constants(sets)
    try:
        ref = load(problem, batch, in_features, out_features, constants)
        g = graph(problem, batch, in_features, out_features, constants)
        shape = int(ref.input.shape[0]), int(ref.input.shape[-1]), g.out_features
        # (the options are positive integers: a size of 0 here is the file's, not the command line's)
        given = f"get_inputs() gives an input of shape {tuple(ref.rows_of or ref.token_of or ref.input.shape)}"
        for what, size in ((f"{given}: {shape[0]} rows", shape[0]), (f"{given}: {shape[1]} features", shape[1]),
                           (f"the last GEMM has {shape[2]} output features", shape[2])):
            if size < 1:
                raise ReferenceError(f"{what}; kgen needs at least 1")
        check_shape(*shape)
    except SpecError as e:
        raise click.UsageError(str(e)) from None
    except (Unsupported, ReferenceError) as e:
        _refuse_module(problem, e)
    # A --set equal to the file's own value changes nothing (and must not name another workload).
    constants = tuple((k, v) for k, v in constants if k in ref.set_constants)
    changed = [f"{name} = {value}" for name, value in constants] + ref.applied
    if changed:
        click.echo(f"workload: {', '.join(changed)} -> batch {shape[0]}, in_features {shape[1]}, "
                   f"out_features {shape[2]}")
    return (*shape, constants)


# --dtype's names (KernelBench's precision names) -> the module's torch dtype (torch.<name>;
# torch is imported where a command needs it).
DTYPES = PRECISIONS

@click.group()
@click.version_option(__version__, prog_name="kgen")
def main():
    """kgen: synthesize fused CUDA ModelNew files for PyTorch reference modules."""


def _other_dtype_tensors(reference, graph) -> list[str]:
    """The floating parameters and buffers the traced forward reads (`graph`'s nodes name them, or
    the module that holds them: a BatchNorm's) whose dtype is not the input's, as 'NAME is DTYPE'
    (at most three named): a 16-bit module that keeps a BatchNorm, a norm or a buffer in fp32
    (mixed precision's habit). One the forward never reads does not count."""
    own = reference.input.dtype
    named = {v for part in graph.parts for n in part.nodes for v in n.attrs.values() if isinstance(v, str)}
    model = reference.meta_model()
    other = [(name, t.dtype) for name, t in (*model.named_parameters(), *model.named_buffers())
             if t.is_floating_point() and t.dtype != own
             and (name in named or any(name.startswith(f"{path}.") for path in named))]
    said = [f"{name} is {str(dtype).removeprefix('torch.')}" for name, dtype in other[:3]]
    return said + ([f"{len(other) - 3} more"] if len(other) > 3 else [])


@main.command()
@problem_option
@shape_options
@click.option("--math", type=click.Choice(MATH_MODES), default=None,
              help="GEMM arithmetic: fp32 FFMA, 3xTF32 or three fp16 products (fp16x3: the wgmma "
                   "backend only; both fp32-accurate tensor cores), TF32, BF16 or FP16 products (bf16 on the "
                   "wgmma backend and fp16, the wgmma backend only: w rounded in the GEMM's registers; fp16 "
                   "keeps TF32's bits within its range, |v| <= 65504) [the fastest fp32-accurate one for the "
                   "backend and shape].")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help=f"kgen's portable GEMM kernels (sm_80+), kgen's Hopper wgmma GEMM (sm_90a; {', '.join(WGMMA_MATHS)}), "
                   "cuBLAS's GEMM with kgen's epilogue kernels, or gemv: no GEMM, the "
                   "matrix-vector rewrite of a module that only sums the GEMM output over its "
                   "features (fp32 sums; it runs bf16 / fp16 modules too) [wgmma on sm_90a, else kgen].")
@click.option("--fusion", type=click.Choice([str(k) for k in FUSION_LEVELS]), default=None,
              help="0: the point-wise chain after the Linear in a kernel of its own (kgen search tries it "
                   "in 16 bits); 1: separate statistics kernel; 2: "
                   "statistics fused into the GEMM [by batch and dtype; 1 for cuBLAS].")
@click.option("--tile", help="CTA tile BMxBNxBK, e.g. 128x128x32.")
@click.option("--warp", help="Warp tile WMxWN, e.g. 64x32 [wgmma: 16xBN].")
@click.option("--thread", help="SIMT thread tile TMxTN, e.g. 8x8 (fp32_simt only).")
@click.option("--stages", type=click.IntRange(min=2), help="Tensor-core pipeline stages (not fp32_simt).")
@click.option("--group", type=click.IntRange(min=1), help="Raster group (tile rows sharing L2).")
@click.option("--arch", type=click.Choice(list(ARCH_LIMITS)), default=None,
              help="Target whose instructions and limits the file must fit [the local GPU; "
                   "without one, sm_90a].")
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where earlier searches' records are looked up [results/ here, beside REF and in "
                   "the folders above it, and the records kgen ships].")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default=None,
              help="The dtype the module will run in: an earlier search's winner in that dtype, else "
                   "(bf16, fp16) an fp32 winner whose file runs 16-bit modules too, else the rule "
                   "[the dtype of the reference's get_inputs()].")
@click.option("-o", "--output", type=click.Path(),
              help="Output file (NAME.py), or a folder to write <name>.py into (one that exists, or "
                   "DIR/) [generated/<name>.py].")
@click.option("--force", is_flag=True,
              help="Replace the output file if it holds anything else (a rerun that would write "
                   "the same text succeeds without it).")
def generate(ref, problem, batch, in_features, out_features, sets, math, backend, fusion, tile, warp,
             thread, stages, group, arch, dtype, results_dir, output, force):
    """Write a ModelNew file for the reference module REF (a KernelBench-style file: Model,
    get_inputs, get_init_inputs), or a shipped --problem. Needs no GPU. A module kgen cannot
    synthesize exits 2, naming the op and its line.

    With no --math/--backend/--fusion/--tile/--warp/--thread/--stages/--group, emits the fastest
    fp32-accurate file kgen knows for the target (an earlier search's winner, else a rule) and
    says what it chose and why."""
    from kgen.tune import choose

    problem = _problem(ref, problem)
    batch, in_features, out_features, constants = _shape(problem, batch, in_features, out_features, sets)
    target = choose.target(arch)
    click.echo(f"target {target.arch}: {target.why}")
    variant_options = (math, backend, fusion, tile, warp, thread, stages, group)
    measured = None
    try:
        if all(v is None for v in variant_options):
            spec, why, measured = choose.fastest_known(problem, batch, in_features, out_features, target,
                                                       results_dir, constants, dtype)
            click.echo(f"chose {spec.config_name()}: {why}")
        else:
            spec = _spec_from_options(problem, batch, in_features, out_features, math, backend,
                                      fusion, tile, warp, thread, stages, group, target, constants)
        path = output_path(output, spec)
        if is_path(problem) and path.exists() and os.path.samefile(path, problem):
            # (with --force too: the emitted file carries the reference's text, but a reference
            # replaced by its ModelNew file is no reference to generate from again)
            raise click.UsageError(f"{path} is the reference file itself; name another output file")
        existed = path.exists()
        path = generator.write(spec, path, measured=measured, overwrite=force)
    except (SpecError, generator.WriteRefused) as e:
        raise click.UsageError(str(e)) from None
    except (Unsupported, ReferenceError) as e:   # (the lowering's refusals: after the trace)
        _refuse_module(problem, e)
    except (StaticCheckError, generator.WriteError) as e:
        raise click.ClickException(str(e)) from None
    if existed and not force:
        click.echo(f"unchanged {path}: it already holds this file ({spec.name()}, key {spec.key()})")
    else:
        click.echo(f"wrote {path}  ({spec.name()}, key {spec.key()})")
    import shlex

    quoted = shlex.quote(str(path))   # (a path to paste: spaces, a leading dash)
    if quoted.startswith("-"):
        quoted = shlex.quote(f"./{path}")
    # (validate and bench run the module in the dtype the header's measurement names, else in its
    # inputs' (_default_dtype): a file written for --dtype bf16 by the rule names none, so the
    # commands to paste say it, or they would check and time the module in fp32)
    run_in = _recorded_dtype(measured) or precision_name(spec.reference().input.dtype)
    quoted += f" --dtype {dtype}" if dtype and dtype != run_in else ""
    click.echo(f"next, on a GPU: kgen validate {quoted} checks it against the reference; "
               f"kgen bench {quoted} times it against eager")
    if not generator.sixteen_bit_builds(spec):
        module = dtype or precision_name(spec.reference().input.dtype)
        if module != "fp32":
            click.echo(f"note: the module is {module}, and this file runs fp32 modules only: "
                       + (generator.fp32_only_reason(spec) if generator.fp32_casts(spec) else
                          "16-bit modules run in the Hopper wgmma files (--backend wgmma, sm_90a) and the "
                          "matrix-vector rewrite's (--backend gemv)"), err=True)
        elif measured is not None and target.arch == "sm_90a":
            click.echo("note: this file runs fp32 modules only; for the module in bf16 or fp16, "
                       "`kgen generate --dtype bf16` (or fp16) writes one that runs them", err=True)
    elif spec.family == "gemv" and (dtype or precision_name(spec.reference().input.dtype)) == "fp32":
        # (choose.fastest_known: only a search in the module's 16-bit dtype picks the rewrite for it)
        click.echo("note: a bf16 / fp16 module runs this file's matrix-vector rewrite, nearer fp64 than eager in "
                   "that dtype but not always within 1e-2 of eager (KernelBench 18); `kgen generate --dtype bf16` "
                   "(or fp16) writes the file a search in that dtype picked, else kgen's 16-bit GEMM", err=True)
    mixed = _other_dtype_tensors(spec.reference(), spec.graph())
    if mixed:
        # (the file reads each parameter and buffer in the input's dtype, or in fp32 in its build for
        # torch.autocast: _kgen_checked_param; a run outside autocast refuses the module as it is)
        own = str(spec.reference().input.dtype).removeprefix("torch.")
        click.echo(f"note: the module's input is {own} and its {', '.join(mixed)}: outside torch.autocast this "
                   f"file's kernels read every parameter and buffer in the input's dtype, and it refuses the module "
                   f"as built (convert it: model.to(torch.{own}))", err=True)
    if measured is None and generator.runs_fp16_products(spec):
        # (a search probes the module's own operands for fp16's range; a file written by the rule
        # has not been near them)
        click.echo("note: fp16 products: an input or weight beyond 65504 becomes infinite in this file's "
                   "GEMM (as under fp16 autocast); `kgen search REF --tol 1e-2` checks the module's own "
                   "operands before it picks fp16, and `kgen validate` the file", err=True)


def output_path(output: str | None, spec: Spec) -> Path:
    """The file generate writes: -o's file, or <name>.py in -o's folder (one that exists, or a
    path ending in a slash), or generated/<name>.py."""
    if output is None:
        return generator.default_path(spec)
    if Path(output).is_dir() or output.endswith(("/", os.sep)):
        return Path(output) / f"{spec.name()}.py"
    if Path(output).suffix != ".py":
        # (`-o out` wrote a file named `out`, where a folder was likely meant; and a file without
        # .py is no module importlib loads by its path)
        raise click.UsageError(f"-o {output}: kgen writes a Python module; name a .py file, or a folder "
                               f"as {output.rstrip('/')}/ to write {spec.name()}.py into it")
    return Path(output)


def _spec_from_options(problem, batch, in_features, out_features, math, backend, fusion, tile,
                       warp, thread, stages, group, target, constants=()) -> Spec:
    """The spec the options name; what they leave out takes the defaults of the family they
    name. An option the chosen GEMM has no use for is an error, never silently dropped."""
    from kgen.tune import choose

    workload = Workload(problem, batch, in_features, out_features, constants)
    if backend is None:
        backend = "wgmma" if target.arch == WGMMA_ARCH and (math or "tf32x3") in WGMMA_MATHS else "kgen"
    math = math or DEFAULT_MATH[backend]
    family = gemm_family(backend, math)
    if family in ("cublas", "gemv"):
        if any(v is not None for v in (tile, warp, thread, stages, group)):
            raise click.UsageError(f"{'cuBLAS chooses its own tiles' if family == 'cublas' else 'the matrix-vector rewrite has no GEMM'}: "
                                   "drop --tile/--warp/--thread/--stages/--group")
        return Spec(workload, Variant(math=math, backend=backend, fusion=int(fusion or 1), arch=target.arch))
    if family == "simt" and stages is not None:
        raise click.UsageError("--stages: the fp32_simt GEMM (SIMT) has no pipeline stages")
    if family != "simt" and thread is not None:
        raise click.UsageError(f"--thread: only the fp32_simt GEMM (SIMT) has a thread tile, not {math}")
    fusion_level = int(fusion) if fusion else None
    # The shape rule's tile for this family (on this family's own target: the wgmma GEMM is
    # Hopper's), then the user's overrides.
    rule_target = dataclasses.replace(target, arch=WGMMA_ARCH) if family == "wgmma" else target
    rule, _ = choose.shape_rule(problem, batch, in_features, out_features, rule_target, backend,
                                math, fusion_level, constants)
    d, fusion_level = rule.tile, rule.fusion
    bm, bn, bk = _dims(tile, 3, "--tile") or (d.bm, d.bn, d.bk)
    given_warp = _dims(warp, 2, "--warp")
    # A wgmma warpgroup's 4 warps own 16 rows x BN each, so that warp tile follows the tile;
    # other families keep the default warp tile where it divides the tile.
    if given_warp:
        wm, wn = given_warp
    elif family == "wgmma":
        wm, wn = 16, bn
    else:
        wm, wn = min(d.wm, bm), min(d.wn, bn)
    tm, tn = (_dims(thread, 2, "--thread") or (d.tm, d.tn)) if family == "simt" else (0, 0)
    spec_tile = Tile(bm, bn, bk, wm, wn, tm=tm, tn=tn,
                     stages=(stages or d.stages) if family != "simt" else 0,
                     group_m=group or d.group_m)
    try:
        try:
            return Spec(workload, Variant(math=math, backend=backend, fusion=fusion_level, tile=spec_tile,
                                          arch=target.arch))
        except SpecError as e:
            # --tile without --stages: the rule's tile's stages, or, where this tile's stages of
            # that count do not fit in shared memory, the most that do
            if stages is not None or family == "simt" or "shared memory" not in str(e):
                raise
            for fewer in range(spec_tile.stages - 1, 1, -1):
                try:
                    return Spec(workload, Variant(math=math, backend=backend, fusion=fusion_level,
                                                  tile=dataclasses.replace(spec_tile, stages=fewer), arch=target.arch))
                except SpecError as again:
                    if "shared memory" not in str(again):
                        raise
            raise
    except SpecError as e:
        if not given_warp and ("WM=" in str(e) or "WN=" in str(e) or "warp tile" in str(e)):
            raise SpecError(f"{e} (the warp tile {wm}x{wn} is the default for this tile; set --warp)") from None
        raise


def _recorded_dtype(measured) -> str | None:
    """The dtype (--dtype's name) a file's header says its module was measured in, None where it
    records no measurement."""
    # (a record of an fp32 measurement names no dtype, as the header reads it: generator.py)
    recorded = measured.get("dtype", "float32") if isinstance(measured, dict) and measured else None
    return precision_name(recorded) if recorded in PRECISIONS.values() else None


def _default_dtype(f, file) -> str:
    """The dtype validate and bench run a file's module in without --dtype: the one its header
    says it was measured in (a search in bf16 or fp16 chose it), else the dtype of the
    reference's get_inputs(); a note says so where the two differ."""
    own = precision_name(f.reference.input.dtype)
    name = _recorded_dtype(getattr(f.module, "KGEN_MEASURED", None))
    if name is None or name == own:
        return own
    click.echo(f"note: {file} was measured with the module in {name} (its header); running it so "
               f"(--dtype {own} for the dtype of the reference's inputs)", err=True)
    return name


def _default_tol(f, file, dtype: str) -> float:
    """The tolerance validate judges a file at without --tol: the tier its header records the
    file was chosen at, where it was measured in this dtype (a search's winner: `--tol 5e-2`'s
    is judged at 5e-2, 1e-3's at 1e-3), else configs.gate_tolerance (the dtype's, or the relaxed
    tier's for a file whose GEMM rounds an fp32 module's operands); a note says which."""
    measured = getattr(f.module, "KGEN_MEASURED", None)
    if isinstance(measured, dict) and measured.get("tol") and measured.get("dtype", "float32") == PRECISIONS[dtype]:
        tol = float(measured["tol"])
        if tol != PRECISION_TOLERANCES[dtype]:
            click.echo(f"note: {file} was chosen in the tier of tolerance {tol:g} (its header); judging it there "
                       "(--tol for another)", err=True)
        return tol
    tol = gate_tolerance(dtype, f.spec.math)
    if tol != PRECISION_TOLERANCES[dtype]:
        click.echo(f"note: {f.spec.math} math rounds the fp32 module's GEMM operands: the relaxed tier's "
                   f"tolerance {tol:g} (--tol for another)", err=True)
    return tol


def _load(file, ref=None):
    from kgen.check.loading import EmittedFile, NotAnEmittedFile

    try:
        f = EmittedFile(file, ref)
        if f.reference_embedded:
            click.echo(f"note: {file}'s reference is not where it was ({f.module.KGEN_SPEC['problem']}); "
                       f"checking against the copy of it the file carries ({f.reference.path})", err=True)
        if f.reference_changed:
            click.echo(f"note: {f.reference.path} changed since {file} was generated (sha256 differs); "
                       "checking against it as it is now", err=True)
        return f
    except NotAnEmittedFile as e:
        raise click.UsageError(str(e)) from None
    except (Unsupported, ReferenceError) as e:   # a reference kgen cannot use: exit 2, as generate's
        _refuse_module(None, e)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--tol", type=Tolerance(), default=None,
              help="atol = rtol of torch.allclose [KernelBench's for the dtype: "
                   + ", ".join(f"{t:g} {name}" for name, t in PRECISION_TOLERANCES.items())
                   + f"; {RELAXED_TOLERANCE:g} for a file whose GEMM rounds an fp32 module's operands "
                   "(TF32, BF16, FP16 products)].")
@click.option("--batch", type=click.IntRange(min=2), default=None, help="Batch size [the file's].")
@click.option("--quick", is_flag=True, help="Core numerical checks only (what a search runs first).")
@click.option("--ref", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Reference file to check against [the one FILE was generated from].")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default=None,
              help="Check the module in this dtype (module and input converted with .to(dtype)); "
                   "eager in that dtype is the yardstick, fp64 the judge [the dtype FILE's header "
                   "says it was measured in, else that of the reference's get_inputs()].")
def validate(file, tol, batch, quick, ref, dtype):
    """Check FILE against its reference on the GPU; exits non-zero on any failure."""
    f = _load(file, ref)
    dtype = dtype or _default_dtype(f, file)
    from kgen.check.validate import dtype_refusal

    module_dtype = torch_dtype(dtype)
    refusal = dtype_refusal(f, module_dtype)
    if refusal:
        raise click.UsageError(refusal)
    _require_cuda("validate")
    from kgen.check.validate import gate_description, summary
    from kgen.check.validate import validate as run_validation

    if tol is None:
        tol = _default_tol(f, file, dtype)
    click.echo(f"validating {file} ({f.spec.name()}) in {DTYPES[dtype]} at tol {tol:g}, errors against fp64; "
               f"passing means {gate_description(tol)}")
    # The extension first (compiled on first use, then cached): the checks' time is their own.
    started = time.monotonic()
    try:
        f.build(module_dtype)
    except Exception as e:  # noqa: BLE001 - a compile error's log, without a traceback
        raise click.ClickException(f"the extension did not build for this GPU: {str(e).strip()[-3000:]}") from e
    click.echo(f"extension for this GPU ready in {time.monotonic() - started:.1f} s (compiled once, then cached)")
    started = time.monotonic()
    own_heap = bool((click.get_current_context().find_root().obj or {}).get("own_heap"))
    results = run_validation(f, tol=tol, quick=quick, batch=batch, report=lambda r: click.echo(r.line()),
                             dtype=module_dtype, own_heap=own_heap)
    click.echo(f"{summary(results)}; the checks took {time.monotonic() - started:.1f} s")
    sys.exit(0 if all(r.passed for r in results) else 1)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--batch", type=click.IntRange(min=2), default=None, help="Batch size [the file's].")
@click.option("--iters", type=click.IntRange(min=10), default=100, show_default=True, help="Timed calls.")
@click.option("--ref", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Reference file to time against [the one FILE was generated from].")
@click.option("--compile", "with_compile", is_flag=True,
              help="Also time torch.compile of the reference (default mode) in the same run.")
@click.option("--autotune", "with_autotune", is_flag=True,
              help='Also time torch.compile(mode="max-autotune") of the reference (slow to compile).')
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default=None,
              help="Run the module and its input in this dtype (as module.to(dtype)); eager and "
                   "torch.compile are timed in it too [the dtype FILE's header says it was "
                   "measured in, else that of the reference's get_inputs()].")
@click.option("--training", is_flag=True,
              help="Time one training step (forward, backward with dL/dx and every parameter's gradient) "
                   "instead of the forward, over 5 rounds interleaved with eager's (--iters steps "
                   "a model in all, at least 10 a round), and print its peak GPU memory and each "
                   "gradient's error against fp64 beside eager's.")
def bench(file, batch, iters, ref, with_compile, with_autotune, dtype, training):
    """Time FILE and the eager reference in the same run and print their ratio."""
    f = _load(file, ref)
    dtype = dtype or _default_dtype(f, file)
    from kgen.check.validate import dtype_refusal

    refusal = dtype_refusal(f, torch_dtype(dtype))
    if refusal:
        raise click.UsageError(refusal)
    _require_cuda("bench")
    from kgen.check.bench import NoTrainingStep, bench as run_bench, bench_training, refuse_training

    try:
        if training:
            refuse_training(f)
    except NoTrainingStep as e:
        raise click.ClickException(str(e)) from None
    f.build(torch_dtype(dtype))
    if training:
        try:
            result = bench_training(f, batch=batch, iters=max(10, iters // 5), dtype=torch_dtype(dtype),
                                    with_compile=with_compile, with_autotune=with_autotune)
        except NoTrainingStep as e:   # an output without a gradient
            raise click.ClickException(str(e)) from None
    else:
        result = run_bench(f, batch=batch, iters=iters, with_compile=with_compile, with_autotune=with_autotune,
                           dtype=torch_dtype(dtype))
    click.echo(result.report())


@main.command()
@search_problem_option
@shape_options
@click.option("--tol", type=Tolerance(), multiple=True,
              help="Tolerance tier(s), atol = rtol of torch.allclose; one winner each [KernelBench's "
                   "for the module's dtype: " + ", ".join(f"{t:g} {name}" for name, t in PRECISION_TOLERANCES.items())
                   + "].")
@click.option("--math", "maths", type=click.Choice(MATH_MODES), multiple=True,
              help="Math modes to try [all].")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parallel builds [cores].")
@click.option("--iters", type=click.IntRange(min=10), default=30, show_default=True,
              help="Timed calls per candidate (the median is its time; the runoff and the full "
                   "validation of the fastest are extra).")
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Try only the N fastest-measured tiles of each math mode (a quick search).")
@click.option("--all", "exhaustive", is_flag=True,
              help="Measure every valid spec: no probe of the math modes, no cost-model pruning.")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("generated"),
              show_default=True, help="Where the winner of each tolerance tier is written.")
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where the search's full record is written.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to draw every candidate's time against its error, per tier (.png, .svg, "
                   ".pdf) [beside the record, as .png]; needs matplotlib (pip install 'kgen[plot]').")
@click.option("--gpus", "gpu_count", type=GpuCount(), default="all", show_default=True,
              help="How many of the visible GPUs measure candidates: `all` or N (the first N), one "
                   "worker each; every candidate is timed with eager on one GPU, the runoff and the "
                   "full validations on the first.")
@click.option("--vs-compile", "vs_compile", is_flag=True,
              help="Time each tier's winner against torch.compile of the reference (default mode and "
                   "max-autotune, in the module's dtype) in one run, and keep the ratios in the record "
                   "(max-autotune compiles for minutes).")
@click.option("--also-batch", "also_batches", type=click.IntRange(min=2), multiple=True,
              help="Another batch size the file must serve (repeatable): each tier's fastest "
                   "candidates are measured at it too, the winner is the one whose slowest ratio to "
                   "eager over all batches is lowest, fully validated at each.")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default=None,
              help="The module's dtype (module and input converted with .to(dtype)): every candidate "
                   "validated and timed in it against eager in it, the tolerance KernelBench's for it "
                   "unless --tol; bf16 / fp16 run on kgen's Hopper GEMM only [the dtype of the "
                   "reference's get_inputs()].")
@click.option("--summary-json", "summary_json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              hidden=True, help="Where to list each file's record and wall time (for a search of "
                                "several files spread over the GPUs, which runs one per GPU).")
def search(refs, problem, batch, in_features, out_features, sets, tol, maths, jobs, iters, top, exhaustive,
           out_dir, results_dir, plot_path, gpu_count, vs_compile, also_batches, dtype, summary_json):
    """Find the fastest valid file per tolerance tier and write it to --out-dir.

    Drops what cannot win before building (math modes whose operand rounding alone breaks every
    tolerance, tiles a cost model puts far behind), reuses measurements cached from earlier
    runs on this device, builds the rest in parallel while the GPU measures each as soon as it
    is built, and runs the full validation on the fastest.

    Several REF files are each searched at their own shape (e.g. KernelBench's folder), with a
    table of their winners at the end: on one GPU one after the other; on several, one search per
    GPU at a time, each file measured, validated and timed against eager on one GPU."""
    from kgen.tune import choose
    from kgen.tune.plot import FORMATS

    # What can be checked without a GPU is checked first: the module(s) and the options.
    if plot_path is not None and plot_path.suffix.lower() not in FORMATS:
        raise click.BadParameter(f"{plot_path}: a plot is written as {', '.join(FORMATS)}",
                                 param_hint="--plot")
    several = len(refs) > 1
    if several:
        given = [name for name, value in (("--problem", problem), ("--batch", batch), ("--in", in_features),
                                          ("--out", out_features), ("--set", sets), ("--plot", plot_path))
                 if value]
        if given:
            raise click.UsageError(f"{', '.join(given)} take one reference file; several files are each "
                                   "searched at their own shape, each plot beside its record")
    problems = [_problem(ref, problem) for ref in (refs or (None,))]
    workloads = []
    for p in problems:
        shape = _shape(p, batch, in_features, out_features, sets)
        workloads.append((p, *shape, dtype or choose.module_dtype(p, shape[3])))
    _require_cuda("search")
    import torch

    from kgen.tune.search import DEFAULT_MATHS, run_search

    gpus = search_gpus(gpu_count)
    jobs = jobs or os.cpu_count() or 2
    if several and len(gpus) > 1:
        _search_files_on_gpus(refs, gpus, jobs, tol=tol, maths=maths, iters=iters, top=top,
                              exhaustive=exhaustive, out_dir=out_dir, results_dir=results_dir,
                              vs_compile=vs_compile, also_batches=also_batches, dtype=dtype)
    # Only what this GPU can build and run: wgmma variants on Hopper alone.
    arch = arch_for_capability(*torch.cuda.get_device_capability())
    rows = []
    for i, (p, b, k, n, constants, module_dtype) in enumerate(workloads):
        if several:
            click.echo(f"=== [{i + 1}/{len(workloads)}] {refs[i]}")
        started = time.monotonic()
        early = _EarlyDraw(plot_path)
        try:
            record = run_search(p, b, k, n, sorted(tol or (PRECISION_TOLERANCES[module_dtype],)),
                                maths=maths or DEFAULT_MATHS, jobs=jobs,
                                iters=iters, top=top, out_dir=out_dir, results_dir=results_dir, arch=arch,
                                exhaustive=exhaustive, echo=lambda line: click.echo(line), constants=constants,
                                gpus=gpus, dtype=module_dtype, vs_compile=vs_compile,
                                also_batches=tuple(x for x in dict.fromkeys(also_batches) if x != b),
                                on_contender=early.start)
        finally:
            early.join()
        _draw(record, plot_path or Path(record["record_path"]).with_suffix(".png"), early.drawn)
        rows.append((refs[i] if refs else p, record, time.monotonic() - started))
    if summary_json is not None:
        generator.write_atomic(summary_json, json.dumps(
            [{"ref": str(ref), "record_path": record["record_path"], "wall_s": wall} for ref, record, wall in rows]))
    if several:
        click.echo(searches_table(rows))
    sys.exit(0 if all(record["winners"] for _, record, _ in rows) else 1)


def _search_files_on_gpus(refs, gpus, jobs, *, tol, maths, iters, top, exhaustive, out_dir, results_dir,
                          vs_compile, also_batches, dtype):
    """Several files on several GPUs: one search per GPU at a time (tune.several); the table of
    their winners, which GPU searched each, and the wall time against the searches' own."""
    from kgen.tune.several import gpu_groups, search_files

    args = [a for t in tol for a in ("--tol", repr(t))] + [a for m in maths for a in ("--math", m)]
    args += ["--iters", str(iters), "--out-dir", str(out_dir), "--results-dir", str(results_dir)]
    args += (["--top", str(top)] if top else []) + (["--all"] if exhaustive else [])
    args += (["--vs-compile"] if vs_compile else []) + (["--dtype", dtype] if dtype else [])
    args += [a for b in also_batches for a in ("--also-batch", str(b))]
    groups = gpu_groups(gpus, len(refs))
    share = max(1, jobs // len(groups))   # the host's cores shared by the searches running at once
    click.echo(f"{len(refs)} files, {len(groups)} searches at a time (GPUs "
               + "; ".join(",".join(map(str, g)) for g in groups) + f"), {share} builds each")
    results, wall = search_files([str(r) for r in refs], gpus, args, share, echo=click.echo)
    rows = [(r.ref, r.record, r.wall_s) for r in results]
    gpu_of = {r.ref: ",".join(r.group) for r in results}
    click.echo(searches_table(rows, gpu_of))
    own = sum(r.wall_s for r in results)
    click.echo(f"wall time {wall:.1f} s on {len(gpus)} GPUs; the searches' own wall times add up to {own:.1f} s")
    failed = [Path(r.ref).name for r in results if r.record is None]
    if failed:
        click.echo(f"{len(failed)} searches ended without a record (their output above says why): "
                   + ", ".join(failed))
    sys.exit(0 if all(r.record and r.record.get("winners") for r in results) else 1)


def searches_table(rows, gpu_of: dict | None = None) -> str:
    """The winners of several searches, one row per file and tier (none: no candidate passed; a
    record of None: the search ended without one), their wall times and (a search spread over
    GPUs) the GPU each ran on."""
    gpu_col = gpu_of is not None
    lines = [f"{'file':<56} {'tol':>7} {'ms':>8} {'x eager':>8} {'wall s':>7}" + (f" {'gpu':>5}" if gpu_col else "")]
    for ref, record, wall in rows:
        name = Path(str(ref)).name[:56]
        gpu = f" {gpu_of.get(str(ref), ''):>5}" if gpu_col else ""
        if record is None:
            lines.append(f"{name:<56} {'-':>7} {'no record':>17} {wall:7.1f}{gpu}")
            continue
        winners = record["winners"] or {f"{t:g}": None for t in record["tols"]}
        for tol, w in winners.items():
            m = (w or {}).get("measured") or {}
            ms = f"{m['median_ms']:8.3f} {m['ratio']:8.3f}" if "median_ms" in m else f"{'none':>8} {'':>8}"
            lines.append(f"{name:<56} {tol:>7} {ms} {wall:7.1f}{gpu}")
    total = sum(wall for _, _, wall in rows)
    lines.append(f"{len(rows)} files, {sum(1 for _, r, _ in rows if r and r['winners'])} with a winner, "
                 f"{total:.1f} s in all")
    return "\n".join(lines)


class _EarlyDraw:
    """The search's plot drawn while the winner's full validation runs (1-2 s of matplotlib's
    import and drawing off the search's path), from the record as it will be if the candidate
    being validated wins. The plot names what it was drawn from (plot.plot_digest), so _draw
    after the search leaves it where the guess held and draws it again where it did not."""

    def __init__(self, path: Path | None):
        self.path, self.thread = path, None
        self.drawn: str | None = None   # the plot_digest of what it drew

    def start(self, record: dict) -> None:
        import threading

        self.join()
        path = self.path or Path(record["record_path"]).with_suffix(".png")
        self.thread = threading.Thread(target=self._draw, args=(record, path), daemon=True)
        self.thread.start()

    def _draw(self, record: dict, path: Path) -> None:
        from kgen.tune.plot import plot_digest, plot_record

        try:
            if plot_record(record, path)[1]:   # (drawn now, not left as an earlier search drew it)
                self.drawn = plot_digest(record)
        except Exception:  # noqa: BLE001 - _draw after the search draws again and says why
            pass

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None


def _draw(record: dict, path: Path, drawn_early: str | None = None) -> bool:
    """Draws a search record; without matplotlib, one line says how to get it. `drawn_early`:
    the digest of the plot _EarlyDraw drew during the search."""
    from kgen.tune.plot import PlotUnavailable, plot_digest, plot_record

    try:
        drawn, changed = plot_record(record, path)
        early = not changed and drawn_early == plot_digest(record)
        click.echo(f"plot: {drawn}" + ("" if changed else " (drawn while the winner was validated)" if early
                                       else " (unchanged: drawn from the same record before)"))
        return True
    except PlotUnavailable as e:
        click.echo(f"note: no plot: {e}", err=True)
    except OSError as e:
        click.echo(f"note: no plot: cannot write {path}: {e.strerror or e}", err=True)
    return False


@main.command()
@click.argument("record_file", metavar="RECORD.json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The picture (.png, .svg, .pdf) [RECORD.png beside the record].")
def plot(record_file, output):
    """Draw a search record (results/search_*.json): every candidate's time against its error vs
    fp64, one panel per tolerance tier, the winner marked, eager fp32 / TF32 and the 3xTF32
    floor as lines. Needs matplotlib: pip install 'kgen[plot]'."""
    import json

    from kgen.tune.plot import FORMATS

    output = output or record_file.with_suffix(".png")
    if output.suffix.lower() not in FORMATS:
        raise click.BadParameter(f"{output}: a plot is written as {', '.join(FORMATS)}", param_hint="-o")
    try:
        record = json.loads(record_file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise click.UsageError(f"{record_file} is not a search record (JSON): {e}") from None
    if not isinstance(record, dict) or "candidates" not in record:
        raise click.UsageError(f"{record_file} is not a search record (no candidates)")
    if not _draw(record, output):
        sys.exit(1)


@main.command()
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Read the search records in this folder alone [results/ here and the records kgen ships].")
@click.option("--json", "as_json", is_flag=True, help="Print the winners as a JSON list (for scripts).")
def winners(results_dir, as_json):
    """List the winners of earlier searches from their records: problem, shape, tolerance tier,
    time, ratio to eager fp32, device and date. `kgen list` is the same command."""
    import json

    from kgen.tune import choose

    dirs = [results_dir] if results_dir else [d for d in (choose.RESULTS_DIR, choose.SHIPPED_RESULTS_DIR)
                                              if d.is_dir()]
    def skipped(path, why):
        click.echo(f"note: skipped {path}: not a search record ({why})", err=True)

    rows = choose.known_winners(list({d.resolve(): d for d in dirs}.values()), skipped)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        click.echo(f"no search records with a winner in {', '.join(str(d) for d in dirs) or 'results/'}")
        return
    click.echo(winners_table(rows))


def winners_table(rows: list[dict]) -> str:
    """The rows of `kgen winners` as aligned text columns."""

    def number(value, fmt):
        return format(value, fmt) if isinstance(value, (int, float)) else "-"

    # (x eager: against eager in the module's dtype, fp32 unless the dtype column says otherwise)
    table = [("problem", "batch x in -> out", "dtype", "tol", "ms", "x eager", "device", "date")]
    for r in rows:
        shape = f"{r['batch']} x {r['in_features']} -> {r['out_features']}"
        shape += "".join(f", {name}={value:g}" for name, value in r["constants"].items())
        table.append((r["problem"], shape, r["dtype"], f"{r['tol']:g}", number(r["median_ms"], ".3f"),
                      number(r["ratio"], ".3f"), r["device"] or "-", r["date"] or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = {4, 5}   # numbers align right
    return "\n".join("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
                     for row in table)


main.add_command(winners, name="list")


@main.command()
def ops():
    """List what a reference module may do after its GEMM for kgen to synthesize it (a module
    that does anything else is refused, naming the op and its line)."""
    import textwrap

    from kgen.frontend.trace import SUPPORTED

    click.echo("kgen synthesizes GEMMs, each followed by an epilogue chain. It takes:")
    for topic, text in SUPPORTED:
        click.echo(textwrap.fill(text, width=100, initial_indent=f"- {topic}: ", subsequent_indent="  "))


# The exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it): not 1, a
# failed validation's or build's.
INTERRUPTED = 130


def run() -> None:
    """The `kgen` command (the console script, `python -m kgen` and `python -m kgen.cli`): a
    process of kgen's own, whose whole heap `kgen validate` may freeze around its checks
    (validate's own_heap). Callers of `main` in their own process (click's test runner in a test
    session) keep their heap as it is. Ctrl-C ends it with one line and exit 130 (click's own
    `Aborted!` exits 1, a failure's status)."""
    try:
        code = main.main(obj={"own_heap": True}, standalone_mode=False)
    except click.exceptions.Abort:   # (click's form of KeyboardInterrupt and EOFError)
        click.echo("kgen: interrupted; every file kgen writes is written whole or not at all, so none "
                   "is left half-written", err=True)
        sys.exit(INTERRUPTED)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    sys.exit(code if isinstance(code, int) else 0)   # (--help, --version: click's Exit, as its code)


if __name__ == "__main__":
    run()
