"""Search: enumerate specs -> drop what cannot win (a probe of the math modes' rounding, a cost
model of the tiles) -> reuse cached measurements -> render -> build (parallel) -> validate +
bench (one GPU worker per GPU of the search, each fed the next candidate as soon as it is built
and free) -> a runoff of the closest and the full validation of the fastest (on one GPU) -> one
winner file per tolerance tier in generated/, listed in generated/index.json.

Failure is data: every candidate ends with a status (compile_error, incorrect, runtime_error,
timeout, passed, or pruned with the reason) and its error text, and one bad candidate never
stops the search.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from kgen.check.rounding import gemm_operands_rounded, round_to
from kgen.codegen import generator
from kgen.frontend.problems import is_path, load
from kgen.ir.graph import computes_weight
from kgen.lower.forward import rewritten
from kgen.tune.configs import (FAST_MMA_TILES, SIMT_TILES, TF32X3_TILES, WGMMA_TILES, fp16x3_x_in_registers,
                               gemm_math, k_splits, launch_tiles)
from kgen.tune.several import host_gpu
from kgen.tune.spec import (FP16X3_W_IN_REGISTERS_MAX_ROWS, FP32_ACCURATE_MATHS, ROUND16_MATHS, WGMMA_ARCH, Spec, SpecError, Tile, Variant,
                             Workload, kgen_source_digest)
from kgen.tune.worker import COMPARE_PREFIX, RESULT_PREFIX, RUNOFF_PREFIX, VALIDATED_PREFIX

GROUP_M = 8
DEFAULT_MATHS = ("fp32_simt", "tf32x3", "fp16x3", "tf32", "bf16", "fp16")
CUBLAS_MATHS = ("fp32_simt", "tf32", "bf16")
STATUSES = ("passed", "incorrect", "runtime_error", "compile_error", "timeout")


def enumerate_specs(problem: str, batch: int, in_features: int, out_features: int,
                    maths=DEFAULT_MATHS, arch: str = WGMMA_ARCH, include_cublas: bool = True,
                    top: int | None = None, constants: tuple = ()) -> list[Spec]:
    """Every valid spec of the search space: one workload, each variant of
    enumerate_variants."""
    workload = Workload(problem, batch, in_features, out_features, constants)
    return [Spec(workload, v) for v in enumerate_variants(workload, maths, arch, include_cublas, top)]


def enumerate_variants(workload: Workload, maths=DEFAULT_MATHS, arch: str = WGMMA_ARCH,
                       include_cublas: bool = True, top: int | None = None) -> list[Variant]:
    """The code variants the search tries for a workload (invalid tiles are dropped; the
    module's graph decides the fusion levels, the matrix-vector rewrite and whether there is a
    GEMM at all); `top` keeps only the first (fastest-measured) tiles of each math mode."""
    from kgen.ir.rewrite import row_sum_of_gemm, simplify

    g = workload.graph()
    has_batchnorm = any(part.batchnorms for part in g.parts)
    variants: list[Variant] = []

    def add(**kw):
        try:
            variants.append(Variant(arch=arch, **kw))
        except SpecError:
            return

    for math in maths:
        # (backend, tile) pairs of this math mode, fastest-measured first.
        tiles: list[tuple[str, Tile]] = []
        if math == "fp32_simt":
            tiles += [("kgen", Tile(bm, bn, bk, wm, wn, tm=tm, tn=tn, group_m=GROUP_M))
                      for bm, bn, bk, wm, wn, tm, tn in SIMT_TILES]
        else:
            if arch == WGMMA_ARCH:
                tiles += [("wgmma", Tile(bm, bn, 32, 16, bn, stages=st, group_m=GROUP_M))
                          for bm, bn, st in WGMMA_TILES.get(math, [])]
            tiles += [("kgen", Tile(bm, bn, bk, wm, wn, stages=st, group_m=GROUP_M))
                      for bm, bn, bk, wm, wn, st in (TF32X3_TILES if math == "tf32x3" else FAST_MMA_TILES)]
        tiles = tiles[:top] if top else tiles
        # Fusion 2 fuses BatchNorm's column partials into the GEMM epilogue: without a
        # BatchNorm both levels are the same code, and fusion 1 alone is searched.
        fused = 2 if has_batchnorm else 1
        for backend, tile in tiles:
            add(math=math, backend=backend, fusion=fused, tile=tile)
        if has_batchnorm:
            # One unfused variant per math mode shows what the fused statistics save.
            add(math=math, backend=tiles[0][0], fusion=1, tile=tiles[0][1])
        if include_cublas and math in CUBLAS_MATHS:
            add(math=math, backend="cublas", fusion=1)
    simplified = simplify(g)[0]
    if simplified.node(simplified.output).kind == "const":
        # Rewrites made the output a constant: every variant is the same fill, so one is built.
        return variants[:1]
    if row_sum_of_gemm(simplified) is not None:
        # The matrix-vector rewrite: a candidate like any other, kept only if it validates.
        add(math="fp32_simt", backend="gemv", fusion=1)
    return variants


def half_variants(workload: Workload, variants: list[Variant]) -> list[Variant]:
    """The variants that run the module in bf16 / fp16 (those with a 16-bit build:
    generator.sixteen_bit_builds), one per distinct 16-bit build. kgen's Hopper 16-bit GEMM
    takes the tile's BM and group only (its BN and stages are configs.HALF_WGMMA_BN / _STAGES)
    and no math mode, so of the variants alike in those and the fusion level the first is kept
    (enumerate_variants lists the fp32-exact math before TF32: the file then stays fp32-exact
    for fp32 input); the matrix-vector rewrite has one 16-bit build."""
    from kgen.lower.forward import fusion0_moves

    def build(v: Variant, fusion: int) -> tuple:
        return (v.backend, v.tile.bm if v.tile else None, v.tile.group_m if v.tile else None, fusion, v.arch)

    kept: dict[tuple, Variant] = {}
    for v in variants:
        if generator.sixteen_bit_builds(Spec(workload, v)):
            kept.setdefault(build(v, v.fusion), v)
    # Fusion 0 where it moves a part's point-wise chain after the Linear (lower.forward.
    # fusion0_moves): in 16 bits that chain in a kernel of its own can beat it in the GEMM's
    # epilogue (choose.rule_fusion), so each 16-bit GEMM build is also tried so.
    if any(fusion0_moves(part) is not None for part in workload.graph().parts):
        for v in list(kept.values()):
            if v.tile is not None:
                kept.setdefault(build(v, 0), dataclasses.replace(v, fusion=0))
    return list(kept.values())


# ---- what cannot win is not built ----------------------------------------------------------
# Effective rate of each GEMM (family, math) at KernelBench's shapes, TFLOP/s, from the GEMM-alone
# and winner timings on an H100 (docs/perf.md). They only rank candidates before anything is
# built; every survivor is measured.
# wgmma tf32x3 and fp16x3 refitted in session 25 to the H100 main job's ten candidates (128 x 128
# tiles: tf32x3 1.207 ms, fp16x3 0.849 with its 0.20 ms split pass, at 1024 x 8192 -> 8192) and
# checked against the 250 candidates of KernelBench's 36 files (docs/perf.md, session 25;
# docs/experiments/s25/cost_model_fit.py). wgmma bf16 (fp32 operands, w in registers): KernelBench
# 12's file, 0.261 ms with its pass over x on an H200 (session 44; the same SMs as an H100's);
# wgmma fp16 is the same kernel on fp16's wgmma instructions, at the same rate.
GEMM_RATES = {
    ("wgmma", "tf32x3"): 117, ("wgmma", "fp16x3"): 215, ("wgmma", "tf32"): 250, ("wgmma", "bf16"): 500,
    ("wgmma", "fp16"): 500,
    ("mma", "tf32x3"): 78, ("mma", "tf32"): 150, ("mma", "bf16"): 200,
    ("simt", "fp32_simt"): 46,
    ("cublas", "fp32_simt"): 51, ("cublas", "tf32"): 366, ("cublas", "bf16"): 450,
}
# fp16x3's GEMM with w split in its registers (square tiles, small batches), TFLOP/s: 128 x 32768
# -> 32768 in 1.99-2.04 ms and 1024 x 8192 -> 8192's GEMM in ~0.9 ms on an H100 (docs/perf.md,
# session 22).
FP16X3_W_IN_REGISTERS_RATE = 140
# How much slower than its 128 x 128 tile a smaller wgmma tile runs the same GEMM (its mainloop:
# fewer operand reuses per byte of shared memory read), measured with the tail wave counted
# apart: the H100 main job's candidates and KernelBench's 36 files on H200s (docs/perf.md,
# session 25). A tile or math not listed is taken at 1.0: not measured, so not penalized.
WGMMA_TILE_SLOWDOWN = {
    ("tf32x3", 64, 128): 1.38, ("tf32x3", 128, 64): 1.42, ("tf32x3", 64, 64): 1.85,
    ("fp16x3", 64, 128): 1.14, ("fp16x3", 64, 64): 1.58,
}
# A candidate is built when the model predicts it within this factor of the best of a
# tolerance tier it can pass. Measured winners sat within 1.1x of the model's best.
PRUNE_FACTOR = 1.25
# (fp32-accurate math modes, spec.FP32_ACCURATE_MATHS: admissible at every tolerance. The others
# are probed.)


# Memory bandwidth the matrix-vector rewrite streams W and x at (GB/s; an H100's HBM3 reaches
# about 3000 of its 3350).
GEMV_BANDWIDTH = 3000


def predicted_ms(spec: Spec, sms: int) -> float:
    """GEMM time at the family's rate, stretched by the tail wave of its CTAs (one per SM: the
    tiles, or their k-splits at a small batch), summed over the module's chained GEMMs, with a
    prologue's (ops on the input before the first GEMM) read and write of x; the matrix-vector
    rewrite's time to read W and x once."""
    if spec.family == "gemv":
        return 4.0 * spec.in_features * (spec.out_features + spec.batch) / (GEMV_BANDWIDTH * 1e6)
    total = 0.0
    for part in (rewritten(p)[0] for p in spec.graph().parts):   # (N: the GEMM's, a pooled weight's)
        if part.is_prologue:
            # Ops on the input before the first GEMM: one kernel that reads x and writes its
            # output, (batch, K) each, in fp32 at the matrix-vector rewrite's bandwidth.
            total += 8.0 * spec.batch * part.in_features / (GEMV_BANDWIDTH * 1e6)
            continue
        flops = 2.0 * spec.batch * part.in_features * part.out_features
        # (the GEMM the variant runs at this K: fp16x3's and wgmma bf16's fall back to tf32x3 / tf32)
        math = gemm_math(spec.family, spec.math, part.in_features)
        rate = None
        if math == "fp16x3":
            # The split of x: read in fp32, written as two fp16 halves (none where the GEMM splits
            # x in its registers: narrow outputs). w's, where the pass makes it (not where the
            # GEMM splits w in its registers), is kept from call to call: a read of w while it is
            # unchanged, as over the search's timed calls (docs/perf.md, session 50); a weight the
            # forward computes is split afresh on every call, as x is.
            w_in_registers = spec.tile.bm == spec.tile.bn and spec.batch <= FP16X3_W_IN_REGISTERS_MAX_ROWS
            x_in_registers = fp16x3_x_in_registers(spec.tile, spec.batch, part.in_features, part.out_features, sms)
            x_bytes = 0.0 if x_in_registers else 8.0
            w_bytes = 0.0 if w_in_registers else 8.0 if computes_weight(part.gemm) else 4.0
            total += (x_bytes * spec.batch + w_bytes * part.out_features) * part.in_features / (GEMV_BANDWIDTH * 1e6)
            rate = FP16X3_W_IN_REGISTERS_RATE if w_in_registers else None
        elif spec.family == "wgmma" and math in ROUND16_MATHS:
            # x rounded to 16 bits in a pass: read in fp32, written in 16 bits.
            total += 6.0 * part.in_features * spec.batch / (GEMV_BANDWIDTH * 1e6)
        ms = flops / ((rate or GEMM_RATES[(spec.family, math)]) * 1e9)
        if spec.family == "wgmma":
            ms *= WGMMA_TILE_SLOWDOWN.get((math, spec.tile.bm, spec.tile.bn), 1.0)
        if spec.tile is not None:
            # The tail wave, of the launch's CTAs: its tiles, each split in K where they are too
            # few to fill the GPU (configs.k_splits); each split's partial tile is written once
            # and read once more.
            tiles = launch_tiles(spec.family, math, spec.tile, spec.batch, part.out_features, part.in_features)
            splits = k_splits(spec.family, math, spec.tile, spec.batch, part.in_features, part.out_features, sms)
            units = tiles * splits
            waves = -(-units // sms)
            ms *= waves * sms / units
            if splits > 1:
                ms += 8.0 * units * spec.tile.bm * spec.tile.bn / (GEMV_BANDWIDTH * 1e6)
        total += ms
    return total


def prune(specs: list[Spec], admissible: dict[float, set[str]], sms: int) -> dict[Spec, str]:
    """The specs the cost model drops, each with the reason. Per tolerance tier, a candidate is
    kept when it is within PRUNE_FACTOR of the best prediction among the math modes the tier
    admits (it may win), or when it is fp32-accurate and within PRUNE_FACTOR of the best
    fp32-accurate prediction: the probe only shows that a reduced-precision mode *may* meet a
    tolerance (rounding is a lower bound on its error), so the tier keeps the accurate
    candidates that win if it does not. Rewrites are kept, and do not count as the best.
    Of the fp32-accurate math modes, the two predicted fastest keep at least their best
    candidate each (fallbacks)."""
    dropped = cost_model_drops(specs, admissible, sms)
    for s in fallbacks(specs, dropped, sms):
        del dropped[s]
    return dropped


def cost_model_drops(specs: list[Spec], admissible: dict[float, set[str]], sms: int) -> dict[Spec, str]:
    """prune's drops before its fallbacks are taken back."""
    dropped = {}
    # A rewrite (the gemv backend) may fail validation where the GEMM passes, so it never sets
    # the bar the GEMM candidates are pruned against, and it is always tried.
    gemms = [o for o in specs if o.family != "gemv"]
    for s in specs:
        if s.family == "gemv":
            continue
        mine, reasons = predicted_ms(s, sms), []
        for tol, maths in admissible.items():
            if s.math not in maths:
                continue
            best = min(predicted_ms(o, sms) for o in gemms if o.math in maths)
            accurate = [predicted_ms(o, sms) for o in gemms if o.math in FP32_ACCURATE_MATHS]
            if mine <= PRUNE_FACTOR * best:
                break
            if s.math in FP32_ACCURATE_MATHS and mine <= PRUNE_FACTOR * min(accurate):
                break
            reasons.append(f"{best:.2f} ms at tol {tol:g}")
        else:
            if reasons:
                dropped[s] = (f"cost model: {mine:.2f} ms predicted, > {PRUNE_FACTOR}x the best "
                              f"({', '.join(reasons)})")
    return dropped


def fallbacks(specs: list[Spec], dropped: dict[Spec, str], sms: int) -> list[Spec]:
    """Of the two fp32-accurate math modes predicted fastest, the best candidate of each whose
    every candidate the cost model dropped: a fallback where the kernels of the math the model
    prefers fail the gate for this module (a GEMM that does not apply, an epilogue or magnitude
    it gets wrong). A search builds them but measures them only where nothing it measured first
    passes (run_search's reserves)."""
    accurate_by_math: dict[str, list[Spec]] = {}
    for s in specs:
        if s.family != "gemv" and s.math in FP32_ACCURATE_MATHS:
            accurate_by_math.setdefault(s.math, []).append(s)
    ranked = sorted(accurate_by_math.values(), key=lambda group: min(predicted_ms(o, sms) for o in group))
    return [min(group, key=lambda o: predicted_ms(o, sms))   # (the first of equals)
            for group in ranked[:2] if all(o in dropped for o in group)]


def keep_eagers_rounding(dropped: dict[Spec, str]) -> list[Spec]:
    """For an ill-conditioned module (eager fp32 itself beyond the tolerance of fp64): takes out
    of `dropped` and returns the specs whose result can have eager's own rounding, the cuBLAS
    fp32 variants (a plain cuBLAS fp32 GEMM, as eager's matmul is; row sums in eager's order:
    kernels/eager_sum.cuh). A judge that compares with eager (KernelBench's eval, the gate's
    replay of it) passes only that, so the cost model keeps them however slow it predicts them;
    the gate says whether the bits came out eager's."""
    kept = [s for s in dropped if s.eager_gemm]
    for s in kept:
        del dropped[s]
    return kept


def probe_maths(problem: str, batch: int, in_features: int, out_features: int,
                maths, tols: list[float], device, constants: tuple = (),
                eager: dict | None = None) -> dict[str, tuple[list[float], str]]:
    """For each reduced-precision math mode: the tolerances it can meet and a one-line reason.
    The probe runs the reference module in fp64 twice, once with each GEMM's operands rounded to
    the mode's operand precision: rounding alone is a lower bound on the mode's error, so a mode that
    fails a tolerance here cannot pass it as a kernel. A second's work instead of building and
    validating every tile of a mode that cannot win. Two inputs, as the gate's full validation
    draws them: the reference's get_inputs() and torch.randn of its shape (bf16 products met 1e-2
    on KernelBench 12's torch.rand input and missed it on torch.randn's, 1.4e-2: built, measured
    and failed at the tier's last step, after the cost model had dropped its tf32 rivals as
    slower; docs/perf.md, session 44)."""
    import copy

    import torch

    from kgen.check.masks import masks_drawn_in
    from kgen.ir.graph import module_tensor, stored_weight
    from kgen.frontend.problems import graph, load

    ref = load(problem, batch, in_features, out_features, constants)
    # (a stored weight is rounded in the module once, to name it where it overflows; a weight the
    # forward computes, F.linear(x, self.weight * s), and every GEMM's input where the GEMM
    # calls it: gemm_operands_rounded)
    traced = graph(problem, batch, in_features, out_features, constants)
    gemms = [part.gemm for part in traced.parts if not part.is_prologue]   # (a prologue has no GEMM)
    torch.manual_seed(0)
    with torch.device(device):
        # (a Dropout in training mode: every forward below from one RNG state, the fp64 ones
        # drawing fp32's mask, so that the errors are the roundings': kgen/check/masks.py)
        exact_model = masks_drawn_in(ref.given_extra_inputs(ref.Model)(*ref.init_args()).double(), torch.float32,
                                     traced.dropouts)
    x = ref.inputs(batch)[0].to(device=device, dtype=torch.float64)
    # (validate._inputs' "randn": fp32 draws, here from a generator of the probe's own)
    x_randn = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(device=device, dtype=torch.float64)
    rounded_model = copy.deepcopy(exact_model)
    out = {}
    cuda = torch.device(device).type == "cuda"
    rng = torch.cuda.get_rng_state(device) if cuda else torch.get_rng_state()

    def from_one_state(model):
        (torch.cuda.set_rng_state(rng, device) if cuda else torch.set_rng_state(rng))
        return model

    with torch.no_grad():
        exact = from_one_state(copy.deepcopy(exact_model))(x)
        exact_randn = from_one_state(copy.deepcopy(exact_model))(x_randn)
        if eager is not None:
            # Eager fp32's own error: where it exceeds a tolerance, KernelBench's comparison with
            # eager can fail any result nearer the exact one (KernelBench 14).
            approx = from_one_state(copy.deepcopy(exact_model).float())(x.float()).double()
            eager["max_abs"] = (approx - exact).abs().max().item()
            eager["within"] = [t for t in tols if torch.allclose(approx, exact, atol=t, rtol=t)]
        for math in maths:
            if math in FP32_ACCURATE_MATHS:
                continue
            m = copy.deepcopy(rounded_model)
            overflows = []   # (operands finite in fp32 and infinite in the math's type: fp16's range)
            for gemm in gemms:
                if stored_weight(m, gemm):
                    w = module_tensor(m, gemm.attrs["weight"])
                    rounded = round_to(math, w)
                    if torch.isinf(rounded).sum() > torch.isinf(w).sum():
                        overflows.append(gemm.attrs["weight"])
                    w.copy_(rounded)
            for name, t in (("the input", x), ("a torch.randn input", x_randn)):
                if torch.isinf(round_to(math, t)).sum() > torch.isinf(t).sum():
                    overflows.append(name)
            # (every GEMM's operands rounded as its kernel rounds them, a chained module's inner
            # activations too: gemm_operands_rounded)
            # (the module's input rounded as the first GEMM reads it; after a prologue, the ops on
            # the input read it exact, and the GEMM reads their result, which gemm_operands_rounded rounds)
            entering = (lambda t: t) if traced.parts[0].is_prologue else (lambda t: round_to(math, t))
            with gemm_operands_rounded(math, overflows):
                approx = from_one_state(m)(entering(x))
                approx_randn = from_one_state(m)(entering(x_randn))
            err = (approx - exact).abs().max().item()
            err_randn = (approx_randn - exact_randn).abs().max().item()
            # (A NaN where fp64 has one, the reference's own on a negative input, is no miss.)
            ok = [t for t in tols if torch.allclose(approx, exact, atol=t, rtol=t)
                  and torch.allclose(approx_randn, exact_randn, atol=t, rtol=t, equal_nan=True)]
            out[math] = (ok, f"operands rounded to {math} alone give max abs error {err:.1e} "
                             f"(torch.randn input: {err_randn:.1e})"
                         + (f"; {', '.join(overflows)} beyond {math}'s range: infinite" if overflows else ""))
    return out


# ---- measurements that are already known are not taken again --------------------------------
def cache_dir() -> Path:
    return Path(os.environ.get("KGEN_CACHE_DIR") or Path.home() / ".cache" / "kgen")


@contextlib.contextmanager
def locked(path: Path):
    """Holds an exclusive lock for `path` while the body reads, changes and rewrites it: several
    searches at once (one per GPU: `kgen search A.py B.py --gpus 2`) share the measurement cache
    and an output folder's index, and a read-modify-write must not drop another's entries. The
    lock file lies in the cache folder (named by the path's hash), never beside a user's files.
    Where no lock can be taken (no fcntl, an unwritable cache folder), the body runs unlocked."""
    name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
    try:
        import fcntl
        folder = cache_dir() / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / f"{name}.lock", "a")
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class MeasurementCache:
    """Results of earlier evaluations and full validations, keyed by the code (spec.key()), the
    workload (the reference's content and the shape: Workload.identity()), the device, the
    torch version and kgen's own source (a change of the validation is a change of verdicts):
    a rerun rebuilds and remeasures nothing it has measured. Only deterministic verdicts are kept (passed, incorrect); crashes and timeouts
    are tried again."""

    def __init__(self, path: Path | None = None):
        self.path = path or cache_dir() / "measurements.json"
        try:
            text = self.path.read_text()
            self.entries = json.loads(text)
            self._saved = json.loads(text)   # what the file held when last read: a copy of its own
        except (OSError, ValueError):
            self.entries, self._saved = {}, {}

    @staticmethod
    def key(spec: Spec, device: str, what: str, dtype: str = "fp32") -> str:
        import torch

        # The reference's content and the workload, not its path: two files of one stem never
        # share a measurement, and an edited reference never reuses a stale one. A module in
        # bf16 / fp16 is another measurement (fp32's keys name no dtype).
        what = what if dtype == "fp32" else f"{what} {dtype}"
        return (f"{what}|{spec.key()}|{spec.workload.identity()}|{device}|"
                f"torch {torch.__version__}|kgen {kgen_source_digest()}")

    def evaluation(self, spec: Spec, device: str, tols: list[float], iters: int, dtype: str = "fp32") -> dict | None:
        """A cached evaluation that answers every requested tolerance, or None."""
        e = self.entries.get(self.key(spec, device, "eval", dtype))
        if not e or e.get("iters", 0) < iters:
            return None
        tried, passing = set(e["tols_tried"]), e["record"].get("passing_tols") or []
        known = all(t in tried or (passing and t >= min(passing)) for t in tols)
        return e["record"] if known else None

    def store_evaluation(self, spec: Spec, device: str, tols: list[float], iters: int, record: dict,
                         dtype: str = "fp32"):
        if record.get("status") in ("passed", "incorrect"):
            self.entries[self.key(spec, device, "eval", dtype)] = {
                "tols_tried": sorted(tols), "iters": iters,
                "record": {k: v for k, v in record.items() if k != "path"}}
            self.save()

    def full_validation(self, spec: Spec, device: str, tol: float, dtype: str = "fp32") -> bool:
        return bool(self.entries.get(self.key(spec, device, f"full tol {tol:g}", dtype)))

    def store_full_validation(self, spec: Spec, device: str, tol: float, dtype: str = "fp32"):
        self.entries[self.key(spec, device, f"full tol {tol:g}", dtype)] = True
        self.save()

    def runoff(self, contenders: list, device: str, dtype: str = "fp32") -> dict | None:
        """A runoff of exactly these contenders timed before on this device: their rounds (and
        eager's), keyed by their paths now; None where there was none."""
        e = self.entries.get(self._runoff_key(contenders, device, dtype))
        if not e:
            return None
        by_key = {c.spec.key(): str(c.path) for c in contenders}
        return {("eager" if k == "eager" else by_key[k]): v for k, v in e.items()}

    def store_runoff(self, contenders: list, device: str, times: dict, dtype: str = "fp32"):
        by_path = {str(c.path): c.spec.key() for c in contenders}
        self.entries[self._runoff_key(contenders, device, dtype)] = {
            ("eager" if k == "eager" else by_path[k]): v for k, v in times.items() if k == "eager" or k in by_path}
        self.save()

    def _runoff_key(self, contenders: list, device: str, dtype: str) -> str:
        # the contenders' keys in order (the order they were timed in), the rounds per contender
        return self.key(contenders[0].spec, device, f"runoff of {len(contenders)} in {RUNOFF_ROUNDS} rounds: "
                        + " ".join(c.spec.key() for c in contenders), dtype)

    def save(self):
        """Merges what this search changed since it last read the file into what is on disk now
        (another search may have stored or replaced entries since: one search per GPU shares the
        cache) and rewrites it, under a lock. Only the changes: the entries this search read and
        left alone are a stale copy, which would put back what another search replaced."""
        missing = object()
        try:
            with locked(self.path):
                try:
                    on_disk = json.loads(self.path.read_text())
                except (OSError, ValueError):
                    on_disk = {}
                changed = {k: v for k, v in self.entries.items() if self._saved.get(k, missing) != v}
                text = json.dumps({**on_disk, **changed}, indent=0, sort_keys=True)
                generator.write_atomic(self.path, text)
        except generator.WriteError:
            return  # a cache that cannot be written only costs time (the changes are kept for the next save)
        self.entries, self._saved = json.loads(text), json.loads(text)


# ---- candidates ------------------------------------------------------------------------------
@dataclasses.dataclass
class Candidate:
    spec: Spec
    path: Path
    status: str = "pending"
    detail: str = ""
    build_s: float = 0.0
    record: dict = dataclasses.field(default_factory=dict)
    cached: bool = False
    runoff_ms: float | None = None   # median of its runoff rounds, when it was in one
    # (--also-batch) its quick validation and timing at each other batch: measured dict, or None
    # where it failed there
    at_batches: dict = dataclasses.field(default_factory=dict)

    @property
    def measured(self) -> dict | None:
        return self.record.get("measured")

    def summary(self) -> dict:
        return {"name": self.spec.name(), "key": self.spec.key(), "spec": portable_spec(self.spec),
                "status": self.status, "detail": self.detail, "build_s": round(self.build_s, 1),
                "cached": self.cached, **({"runoff_ms": self.runoff_ms} if self.runoff_ms else {}),
                **({"at_batches": {str(b): m for b, m in self.at_batches.items()}} if self.at_batches else {}),
                **{k: v for k, v in self.record.items() if k not in ("path", "status", "detail")}}


def _build(c: Candidate, timeout: float, env: dict, dtype: str = "fp32", autocast: bool = False,
           fp32_weight: bool = False) -> Candidate:
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "kgen.tune.worker", "build", *dtype_args(dtype),
                               *(["--autocast"] if autocast else []), *(["--fp32-weight"] if fp32_weight else []),
                               str(c.path)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        c.status, c.detail = "timeout", f"build took longer than {timeout:.0f} s"
    else:
        if proc.returncode != 0:
            c.status, c.detail = "compile_error", (proc.stdout + proc.stderr)[-3000:]
        else:
            c.status = "built"
    c.build_s = time.monotonic() - start
    return c


def build_all(candidates: list[Candidate], jobs: int, timeout: float, echo,
              on_built: Callable[[Candidate], None] = lambda c: None, dtype: str = "fp32",
              autocast: bool = False, fp32_weight: bool = False) -> None:
    """Builds in parallel, each file's extension for a module in `dtype` (the build a search in
    that dtype measures: a file builds once per dtype it meets, and a GPU worker that met an
    unbuilt dtype would build it there, one file at a time; `autocast`: a 16-bit dtype's build
    for inside torch.autocast, with `fp32_weight` an fp32 module's there, EmittedFile.build);
    on_built sees each candidate as soon as its build ends."""
    env = dict(os.environ, MAX_JOBS="2")  # main.cpp (empty) and the kernels' translation unit
    done = 0
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = [pool.submit(_build, c, timeout, env, dtype, autocast, fp32_weight) for c in candidates]
        for future in concurrent.futures.as_completed(futures):
            c = future.result()
            done += 1
            echo(f"  build [{done}/{len(candidates)}] {c.status:<13} {c.build_s:5.1f} s  {c.spec.name()}")
            on_built(c)
    except BaseException:
        # Ctrl-C (or a failure): no queued build starts. (`with` waited for every one of them,
        # minutes of nvcc after the interrupt; the running ones end with it, their processes
        # interrupted from the terminal too.)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()


def _reader(stream, q: queue.Queue):
    for line in stream:
        q.put(line)
    q.put(None)


def gpu_env(gpus: list[int] | None, gpu: int | None) -> dict | None:
    """The environment of a GPU subprocess that is to use GPU `gpu` (an index among the GPUs this
    process sees): CUDA_VISIBLE_DEVICES naming that GPU alone (it is then the subprocess's device
    0), mapped through this process's own CUDA_VISIBLE_DEVICES where it has one. None (inherit
    the environment unchanged: the single-GPU search as it always ran) for a search on this
    process's device 0 alone."""
    if gpu is None or (gpus in (None, [0]) and gpu == 0):
        return None
    return dict(os.environ, CUDA_VISIBLE_DEVICES=host_gpu(gpu))


def dtype_args(dtype: str) -> list[str]:
    """A worker's or `kgen validate`'s --dtype (fp32, the default, unsaid)."""
    return [] if dtype == "fp32" else ["--dtype", dtype]


def worker_command(tols: list[float], batch: int | None, iters: int, dtype: str = "fp32") -> list[str]:
    cmd = [sys.executable, "-m", "kgen.tune.worker", "evaluate", "--iters", str(iters)]
    for t in tols:
        cmd += ["--tol", repr(t)]
    if batch:
        cmd += ["--batch", str(batch)]
    return cmd + dtype_args(dtype) + ["-"]


class Evaluator:
    """One GPU worker process per GPU of the search, all fed from one queue of built candidates
    (a free worker takes the next one), so that measuring overlaps building. Each candidate is
    validated and timed, eager with it, on one GPU by one worker; its record says which
    (`gpu`, an index among the GPUs the search sees). A worker that crashes or hangs is replaced
    on its GPU and the candidate it was on is marked; the CUDA context of a healthy worker stays
    warm across candidates. gpus None: one worker in the search's own environment."""

    def __init__(self, tols: list[float], batch: int | None, iters: int, timeout: float, echo,
                 on_result: Callable[[Candidate], None], total: int, gpus: list[int] | None = None,
                 command: list[str] | None = None):
        """With candidates to come (`total`), each worker process starts at once, so that its
        start (torch, CUDA, the imports a first evaluation makes: worker.warm_up) overlaps the
        builds rather than delaying the first candidate's measurement."""
        self.tols, self.batch, self.iters, self.timeout = tols, batch, iters, timeout
        self.echo, self.on_result, self.total = echo, on_result, total
        self.gpus = list(gpus) if gpus else None
        self.command = command or worker_command(tols, batch, iters)
        self.done = self.submitted = 0
        self.lock = threading.Lock()
        self.inbox: queue.Queue = queue.Queue()
        self.workers = [_Worker(self, gpu) for gpu in (self.gpus or [None])]
        for w in self.workers:
            w.thread.start()

    def submit(self, c: Candidate):
        with self.lock:
            self.submitted += 1
        self.inbox.put(c)

    def drain(self):
        """Waits until every submitted candidate is measured (or no worker thread is left to
        measure it: one that raised, its error printed); the workers stay up."""
        while True:
            with self.lock:
                if self.done >= self.submitted:
                    return
            if not any(w.thread.is_alive() for w in self.workers):
                return
            time.sleep(0.01)

    def worker_on(self, gpu: int | None) -> _Worker:
        """The worker on `gpu` (None: the search's own environment), for the runoff and the full
        validations after drain(): warm from its candidates, or started on first use."""
        return next(w for w in self.workers if w.gpu == gpu or self.gpus is None)

    def finish(self, kill: bool = False):
        """Ends the workers: each after the candidates and requests it has (its stdin closed);
        with `kill` (the search failed or was interrupted) at once."""
        if kill:
            for w in self.workers:
                with contextlib.suppress(OSError, AttributeError):
                    w.proc.kill()
        for _ in self.workers:
            self.inbox.put(None)
        for w in self.workers:
            w.thread.join(timeout=30 if kill else None)

    def finished(self, c: Candidate, gpu: int | None):
        with self.lock:
            self.done += 1
            m = c.measured
            timing = f"{m['median_ms']:.3f} ms, {m['ratio']:.3f}x eager" if m else ""
            where = f" gpu {gpu}" if self.gpus and len(self.gpus) > 1 else ""
            self.echo(f"  eval  [{self.done}/{self.total}]{where} {c.status:<13} {timing:<26} {c.spec.name()}")
            self.on_result(c)


class _Worker:
    """One evaluate subprocess on one GPU, restarted after a crash or a hang."""

    def __init__(self, owner: Evaluator, gpu: int | None):
        self.owner, self.gpu = owner, gpu
        self.env = gpu_env(owner.gpus, gpu)
        self.proc = None
        self.lines: queue.Queue | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _start(self):
        self.proc = subprocess.Popen(self.owner.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=self.env)
        self.lines = queue.Queue()
        threading.Thread(target=_reader, args=(self.proc.stdout, self.lines), daemon=True).start()

    def _stop(self, kill: bool):
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError):   # (a worker that died has a broken pipe)
                self.proc.stdin.close()
        self._reap()

    def _reap(self) -> int:
        """Waits for the worker's end, closes its pipes and forgets it: its exit code."""
        code = self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self.proc = None
        return code

    def _run(self):
        fed = False
        if self.owner.total:
            self._start()
        while True:
            c = self.owner.inbox.get()
            if c is None:
                # A worker that never got a candidate (every build failed) is not waited for:
                # its warm-up may take a while, or hang.
                self._stop(kill=not fed)
                return
            fed = True
            try:
                self._evaluate(c)
            except Exception as e:  # noqa: BLE001 - the search goes on; this candidate says why
                c.status, c.detail = "runtime_error", f"the search's exchange with its worker failed: {e!r}"[:2000]
                self._stop(kill=True)
            if self.gpu is not None:
                c.record["gpu"] = self.gpu
            self.owner.finished(c, self.gpu)

    def _exchange(self, line: str, prefix: str, timeout: float) -> tuple[dict | None, list[str], str]:
        """Writes `line` to the worker (started first where none runs, replaced where it died) and
        reads its output up to the line starting with `prefix`: (that line's JSON, the lines
        before it, ""), or (None, those lines, why not): "timeout" (the worker killed after
        `timeout` s), "exited with N", or "unreadable answer: ..."."""
        if self.proc is not None and self.proc.poll() is not None:
            self._reap()
        if self.proc is None:
            self._start()
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass   # it died (in its warm-up, say): its output says why, below
        log: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                out = self.lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                self._stop(kill=True)
                return None, log, "timeout"
            if out is None:
                return None, log, f"exited with {self._reap()}"
            if out.startswith(prefix):
                try:
                    return json.loads(out[len(prefix):]), log, ""
                except ValueError as e:
                    self._stop(kill=True)
                    return None, log, f"unreadable answer: {e}"
            log.append(out)

    def ask(self, request: dict, prefix: str, timeout: float) -> tuple[dict | None, str]:
        """One JSON request to this worker (kgen.tune.worker.command), between candidates (the
        Evaluator drained): the answer's JSON and the lines before it, or None and why not (the
        last line saying so). A worker that dies, hangs past `timeout` or says it is exiting
        (its CUDA context lost) is gone after the request; the next starts another."""
        answer, log, why = self._exchange(json.dumps(request), prefix, timeout)
        if answer is None:
            why = f"took longer than {timeout:.0f} s" if why == "timeout" else f"the worker {why}"
            last = log[-1].strip() if log else ""
            return None, "".join(log) + why + (f" (its last line: {last[:300]})" if last else "")
        if answer.pop("exiting", False):
            self._stop(kill=False)
        return answer, "".join(log)

    def _evaluate(self, c: Candidate):
        timeout = self.owner.timeout
        record, log, why = self._exchange(str(c.path), RESULT_PREFIX, timeout)
        if record is None:
            c.status = "timeout" if why == "timeout" else "runtime_error"
            c.detail = (f"no result within {timeout:.0f} s" if why == "timeout"
                        else f"worker {why}: " + "".join(log[-20:])[-2000:])
            return
        c.record, c.status, c.detail = record, record["status"], record.get("detail", "")
        if c.status == "runtime_error":
            # The worker exits after a candidate that raised: the context may be gone.
            self._stop(kill=False)


def tf32_ratio(measured: dict) -> float | None:
    """The time against eager with TF32 GEMMs, measured beside eager fp32 in an fp32 search (bench's
    eager_tf32_ms): the yardstick of the relaxed tiers, whose candidates round the GEMM's operands
    as eager TF32 (or autocast) does; None where there is none: a 16-bit module's record names its
    dtype, and its eager_tf32_ms is eager in that dtype (bench times no TF32 there)."""
    tf32 = measured.get("eager_tf32_ms")
    return measured["median_ms"] / tf32 if tf32 and "dtype" not in measured else None


def results_table(candidates: list[Candidate]) -> str:
    # "x eager": against eager in the module's dtype (fp32: TF32 off); "x TF32": against eager fp32
    # with TF32 GEMMs, the relaxed tiers' yardstick. "err/eager": the worst ratio of the
    # candidate's error against fp64 to eager fp32's (the fp32-exact gate's measure,
    # validate.FP32_EXACT_FACTOR at most in the fp32-exact tiers).
    rows = [f"{'status':<13} {'median ms':>9} {'x eager':>8} {'x TF32':>7} {'max abs err':>11} {'err/eager':>9} "
            f"{'tols':<14} name"]
    order = sorted(candidates, key=lambda c: (c.status != "passed",
                                              c.measured["median_ms"] if c.measured else 0.0))
    for c in order:
        m = c.measured
        if m:
            tols = ",".join(f"{t:g}" for t in c.record.get("passing_tols", []))
            tf32 = tf32_ratio(m)
            rows.append(f"{c.status:<13} {m['median_ms']:>9.3f} {m['ratio']:>8.3f} "
                        f"{'-' if tf32 is None else f'{tf32:.3f}':>7} "
                        f"{m['max_abs_err']:>11.2e} {m.get('error_ratio', float('nan')):>9.2f} {tols:<14} {c.spec.name()}{'  (cached)' if c.cached else ''}")
        else:
            first = c.detail.strip().splitlines()[-1][:90] if c.detail.strip() else ""
            rows.append(f"{c.status:<13} {'-':>9} {'-':>8} {'-':>7} {'-':>11} {'-':>9} {'-':<14} {c.spec.name()}  {first}")
    return "\n".join(rows)


# ---- runoff ----------------------------------------------------------------------------------
# A tier's fastest candidates within RUNOFF_MARGIN of each other are timed again, against each
# other, before the winner is chosen: one measurement each does not separate them (a file's
# median moved by up to 8 % with what ran before it on the GPU; docs/perf.md).
RUNOFF_MARGIN = 0.03
RUNOFF_MAX = 3
RUNOFF_ROUNDS = 5
# Timed calls per file in each round (the median is the round's time), whatever the search's --iters.
RUNOFF_ITERS = 30


def runoff_contenders(passing: list[Candidate]) -> list[Candidate]:
    """Of the passing candidates, fastest first: the first RUNOFF_MAX within RUNOFF_MARGIN of
    the fastest, when they are two or more (none otherwise)."""
    if not passing:
        return []
    best = passing[0].measured["median_ms"]
    close = [c for c in passing[:RUNOFF_MAX] if c.measured["median_ms"] <= best * (1 + RUNOFF_MARGIN)]
    return close if len(close) > 1 else []


def runoff_order(contenders: list[Candidate], times: dict) -> list[Candidate]:
    """The contenders by the median of their runoff rounds (kgen.check.bench.runoff's times)."""
    for c in contenders:
        c.runoff_ms = round(statistics.median(times[str(c.path)]), 4)
    return sorted(contenders, key=lambda c: c.runoff_ms)


def _worker_json(args: list[str], prefix: str, timeout: float, env: dict | None) -> tuple[dict | None, str]:
    """`python -m kgen.tune.worker ARGS` in a subprocess (a crash costs only its own work): the
    JSON of its line starting with `prefix`, or None and why not."""
    try:
        proc = subprocess.run([sys.executable, "-m", "kgen.tune.worker", *args],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"took longer than {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith(prefix):
            try:
                return json.loads(line[len(prefix):]), ""
            except ValueError as e:
                return None, f"unreadable result: {e}"
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return None, tail[-1] if tail else f"exit {proc.returncode}"


def run_runoff(contenders: list[Candidate], timeout: float, worker: _Worker) -> tuple[dict | None, str]:
    """The contenders' runoff (kgen.check.bench.runoff) by the search's warm `worker`, on its GPU
    and in its dtype: (times, error)."""
    times, log = worker.ask({"runoff": [str(c.path) for c in contenders], "rounds": RUNOFF_ROUNDS,
                             "iters": RUNOFF_ITERS}, RUNOFF_PREFIX, timeout)
    tail = log.strip().splitlines()
    return times, "" if times is not None else (tail[-1] if tail else "no answer")


def compare_with_compile(path: Path, timeout: float, env: dict | None = None,
                         dtype: str = "fp32") -> tuple[dict | None, str]:
    """kgen.tune.worker compare in a subprocess: the winner, eager and torch.compile of the
    reference (default and max-autotune) in one run, in the module's dtype: (times, error)."""
    return _worker_json(["compare", *dtype_args(dtype), str(path)], COMPARE_PREFIX, timeout, env)


def compile_line(times: dict) -> str:
    """One line of `compare_with_compile`'s times, as ratios of kgen's time to each."""
    k = times["kgen_ms"]
    return (f"kgen {k:.3f} ms; eager {times['dtype']} {times['eager_ms']:.3f} ms ({k / times['eager_ms']:.3f}x), "
            f"torch.compile {times['compile_ms']:.3f} ms ({k / times['compile_ms']:.3f}x), "
            f"max-autotune {times['max_autotune_ms']:.3f} ms ({k / times['max_autotune_ms']:.3f}x), one run")


def full_validation(path: Path, tol: float, timeout: float, worker: _Worker,
                    batch: int | None = None) -> tuple[bool, str]:
    """`kgen validate`'s checks of the file by the search's warm `worker`, on its GPU and in its
    dtype: (passed, the checks' lines)."""
    answer, log = worker.ask({"validate": str(path), "tol": tol, "batch": batch}, VALIDATED_PREFIX, timeout)
    return bool(answer and answer["passed"]), log


def failed_checks(log: str) -> str:
    """What a full validation's output says failed, for the search's line (its FAIL lines, or its
    last line where it ended another way), e.g. ': FAIL  training, 20 steps ...'."""
    fails = [line.strip() for line in log.splitlines() if line.startswith("FAIL")]
    if not fails:
        last = log.strip().splitlines()[-1:] if log.strip() else []
        return f": {last[0][:200]}" if last else ""
    return ": " + "; ".join(line[:160] for line in fails[:3]) + (f"; {len(fails) - 3} more" if len(fails) > 3 else "")


# --also-batch: how many of a tier's fastest candidates (in their runoff's order) are measured at
# the other batches too; the rest follow them, each still fully validated at every batch before
# it can win.
ACROSS_BATCHES_TOP = 3
# A contender whose ratio to eager at a batch is more than this many times the best there is
# timed once more and keeps the lower of its two ratios: one disturbed measurement decides the ranking by
# the slowest ratio otherwise (measured on an H100: two 128x128 files at 0.187 / 0.211 ms at 7
# rows where a third, and they in an earlier run, took 0.040 ms, all three running one kernel).
RETIME_FACTOR = 2.0


def measure_at_batch(paths: list[Path], tol: float, batch: int, iters: int, timeout: float,
                     env: dict | None = None, dtype: str = "fp32") -> tuple[dict, str]:
    """The worker's quick validation and timing of each file at `batch` (eager timed in the same
    run; the search's worker command, its paths on stdin), in one subprocess on the GPU `env`
    names: ({path: its record}, why some are missing)."""
    try:
        proc = subprocess.run(worker_command([tol], batch, iters, dtype), input="\n".join(map(str, paths)) + "\n",
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {}, f"took longer than {timeout:.0f} s"
    records = {}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record = json.loads(line[len(RESULT_PREFIX):])
            records[record["path"]] = record
    missing = [str(p) for p in paths if str(p) not in records]
    return records, (f"no result for {', '.join(missing)}: {(proc.stdout + proc.stderr)[-500:]}" if missing else "")


def worst_ratio(c: Candidate) -> float:
    """The candidate's largest ratio to eager over the search's batch and its other batches
    (inf where it failed at one or was not measured there)."""
    ratios = [c.measured["ratio"]] + [m["ratio"] if m else math.inf for m in c.at_batches.values()]
    return max(ratios)


def rank_across_batches(passing: list[Candidate], tol: float, batches: tuple, iters: int, timeout: float,
                        env: dict | None, dtype: str, echo: Callable[[str], None], stamp) -> list[Candidate]:
    """--also-batch: the tier's ACROSS_BATCHES_TOP fastest measured again at each other batch
    (quick validation at that batch too), then ordered by their worst ratio to eager over all the
    batches; one that fails at a batch is out. The rest keep their order after them."""
    contenders = passing[:ACROSS_BATCHES_TOP]
    for b in batches:
        records, error = measure_at_batch([c.path for c in contenders], tol, b, iters, timeout, env, dtype)
        if error:
            echo(f"{stamp()} tol {tol:g}: at batch {b}: {error}")
        for c in contenders:
            r = records.get(str(c.path))
            ok = _passed_at(r, tol)
            c.at_batches[b] = r["measured"] if ok else None
            if r is not None and not ok:
                echo(f"{stamp()} tol {tol:g}: {c.spec.name()} fails at batch {b} ({r.get('status')}: "
                     f"{r.get('detail', '')[:200]}); it is out")
        _retime_outliers(contenders, tol, b, iters, timeout, env, dtype, echo, stamp)
    kept = sorted((c for c in contenders if worst_ratio(c) < math.inf), key=worst_ratio)
    batch_list = ", ".join(str(b) for b in batches)
    for c in kept:
        each = ", ".join(f"batch {b} {m['median_ms']:.3f} ms ({m['ratio']:.3f}x)" for b, m in c.at_batches.items())
        echo(f"           {c.spec.name()}: {c.measured['median_ms']:.3f} ms ({c.measured['ratio']:.3f}x); {each}")
    echo(f"{stamp()} tol {tol:g}: {len(kept)} of the {len(contenders)} fastest also pass at batch {batch_list}; "
         "ordered by their slowest ratio to eager over all batches")
    return kept + [c for c in passing if c not in contenders]


def _passed_at(record: dict | None, tol: float) -> bool:
    """Whether a worker's record at another batch says the file passed there at `tol`."""
    return record is not None and record.get("status") == "passed" and tol in record.get("passing_tols", [])


def _retime_outliers(contenders: list[Candidate], tol: float, batch: int, iters: int, timeout: float,
                     env: dict | None, dtype: str, echo: Callable[[str], None], stamp) -> None:
    """Times again, once, each contender whose ratio to eager at `batch` is more than RETIME_FACTOR
    times the best there; it keeps the lower of its two ratios (each against eager timed in its
    own run; a real slowness is slow twice)."""
    timed = [c for c in contenders if c.at_batches.get(batch)]
    if not timed:
        return
    best = min(c.at_batches[batch]["ratio"] for c in timed)
    slow = [c for c in timed if c.at_batches[batch]["ratio"] > RETIME_FACTOR * best]
    if not slow:
        return
    records, error = measure_at_batch([c.path for c in slow], tol, batch, iters, timeout, env, dtype)
    if error:
        echo(f"{stamp()} tol {tol:g}: timing again at batch {batch}: {error}")
    for c in slow:
        first = c.at_batches[batch]
        r = records.get(str(c.path))
        again = r["measured"] if _passed_at(r, tol) else None
        if again is not None and again["ratio"] < first["ratio"]:
            c.at_batches[batch] = again
        echo(f"{stamp()} tol {tol:g}: {c.spec.name()} at batch {batch}: {first['median_ms']:.3f} ms "
             f"({first['ratio']:.3f}x eager), over {RETIME_FACTOR:g}x the best ratio there ({best:.3f}x); timed again: "
             + ("no result" if again is None else f"{again['median_ms']:.3f} ms ({again['ratio']:.3f}x)")
             + "; the lower ratio kept")


# ---- winners ---------------------------------------------------------------------------------
INDEX_NAME = "index.json"


def winner_path(out_dir: Path, spec: Spec, tol: float, dtype: str = "fp32") -> Path:
    """One file per problem, shape, tolerance tier and module dtype (fp32 unsaid): a new winner
    replaces the old one."""
    return out_dir / f"{spec.shape_name()}_tol{tol:g}{'' if dtype == 'fp32' else '_' + dtype}.py"


def distinct_path(path: Path, sha256: str) -> Path:
    """`path`, or, where it holds another reference's file (two files of one name, shape and
    tier: two `model.py`), the same name with this reference's sha256 prefix added: a search
    never replaces a different module's winner or record."""
    try:
        text = path.read_text()
    except OSError:
        return path
    m = re.search(r"(?:KGEN_REFERENCE_SHA256 = |\"reference_sha256\": )['\"]([0-9a-f]{64})['\"]", text)
    if m is None or m.group(1) == sha256:
        return path
    return path.with_name(f"{path.stem}_{sha256[:8]}{path.suffix}")


def read_index(out_dir: Path) -> dict:
    try:
        return json.loads((out_dir / INDEX_NAME).read_text())
    except (OSError, ValueError):
        return {"winners": {}}


def portable_problem(problem: str) -> str:
    """How a record names a reference: a shipped name as is, a path relative to the working
    directory where it lies below it, else just the file's name. Records are matched by the
    reference's sha256, never by this, so they travel with a clone or a moved tree."""
    if not is_path(problem):
        return problem
    path = Path(problem)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name


def portable_spec(spec: Spec) -> dict:
    d = spec.to_dict()
    d["problem"] = portable_problem(spec.problem)
    return d


def record_winner(out_dir: Path, path: Path, spec: Spec, tol: float, measured: dict,
                  dtype: str = "fp32") -> dict | None:
    """Lists the winner in out_dir/index.json; returns the entry it replaced, if any. Locked:
    searches running at once (one per GPU) may list their winners in one folder."""
    with locked(out_dir / INDEX_NAME):
        return _record_winner(out_dir, path, spec, tol, measured, dtype)


def _record_winner(out_dir: Path, path: Path, spec: Spec, tol: float, measured: dict, dtype: str) -> dict | None:
    index = read_index(out_dir)
    index["about"] = ("The current winner of each problem, shape and tolerance tier, written by "
                      "`kgen search`; every file's header holds the same measurement.")
    previous = index["winners"].get(path.name)
    index["winners"][path.name] = {
        "problem": portable_problem(spec.problem), "reference_sha256": spec.workload.sha256,
        "batch": spec.batch, "in_features": spec.in_features,
        "out_features": spec.out_features, "tol": tol, **({} if dtype == "fp32" else {"dtype": dtype}),
        "arch": spec.arch, "variant": spec.name(),
        "key": spec.key(), "spec": portable_spec(spec), "measured": measured}
    index["winners"] = dict(sorted(index["winners"].items()))
    generator.write_atomic(out_dir / INDEX_NAME, json.dumps(index, indent=1) + "\n")
    return previous


def run_search(problem: str, batch: int, in_features: int, out_features: int, tols: list[float],
               maths=DEFAULT_MATHS, jobs: int = 8, work_dir: Path = Path(".kgen_work"),
               out_dir: Path = generator.DEFAULT_OUTPUT_DIR, results_dir: Path = Path("results"),
               build_timeout: float = 900, eval_timeout: float = 300, iters: int = 30,
               top: int | None = None, arch: str = WGMMA_ARCH, exhaustive: bool = False,
               cache: MeasurementCache | None = None,
               echo: Callable[[str], None] = print, constants: tuple = (),
               gpus: list[int] | None = None, dtype: str = "fp32", vs_compile: bool = False,
               also_batches: tuple = (), on_contender: Callable[[dict], None] | None = None) -> dict:
    """The search; returns its record as written, with where (`record_path`). gpus: the GPUs it
    measures on (indices among those this process sees; one worker each) [this process's device
    0 alone]; the runoff and the full validations run on the first, so that their times compare.
    dtype: the module's (configs.PRECISIONS; the module and its input converted as
    module.to(dtype) makes them): every candidate validated and timed in it, against eager in it;
    in bf16 / fp16 only the variants with a 16-bit build are tried (half_variants), and the probe
    of the math modes and the cost model, both about fp32 operands, are skipped.
    vs_compile: each tier's winner is timed again with eager and torch.compile of the reference
    (default and max-autotune: minutes of compiling) in one run, on the first GPU; the record's
    winner keeps the times (`vs_compile`).
    also_batches: other batch sizes the file must serve well: each tier's fastest are measured
    at each of them too, the winner is the one whose slowest ratio to eager over all the batches
    is lowest (rank_across_batches), and it is fully validated at every batch.
    on_contender: called as a candidate's full validation starts, with the record as it would be
    if the candidate won (its `record_path` in it), for work that can overlap the validation (the
    CLI draws the plot meanwhile; the record returned says whether the guess held)."""
    import torch

    started = time.monotonic()

    def stamp() -> str:
        return f"[{time.monotonic() - started:5.1f} s]"

    gpus = list(gpus) if gpus else [0]
    names = {i: torch.cuda.get_device_name(i) for i in gpus}
    if len(set(names.values())) > 1:
        raise ValueError(f"the GPUs of a search must be of one kind, so that their times compare: "
                         + ", ".join(f"{i}: {n}" for i, n in names.items()))
    device = names[gpus[0]]
    sms = torch.cuda.get_device_properties(gpus[0]).multi_processor_count
    home = gpus[0]   # the runoff and the full validations run here
    home_env = gpu_env(gpus, home)
    cache = cache or MeasurementCache()
    # One workload, many code variants: the candidates.
    workload = Workload(problem, batch, in_features, out_features, constants)
    shape = workload.shape_name()
    variants = enumerate_variants(workload, maths, arch=arch, top=top)
    if dtype != "fp32":
        variants = half_variants(workload, variants)
    specs = [Spec(workload, v) for v in variants]
    on = (f"{len(gpus)} x {device} (GPUs {', '.join(map(str, gpus))}: one worker each, every candidate "
          f"timed with eager on one; the runoff and full validations on GPU {home})"
          if len(gpus) > 1 else device)
    echo(f"{stamp()} search {shape}{'' if dtype == 'fp32' else ' in ' + dtype} on {on} ({arch}, {sms} SMs): "
         f"{len(specs)} valid specs, tolerances {', '.join(f'{t:g}' for t in tols)}")
    if not specs:
        echo(f"{stamp()} no variant runs a {dtype} module on {arch} (16-bit modules run on kgen's Hopper "
             "wgmma GEMM, sm_90a, and in the matrix-vector rewrite where it applies)")
    elif dtype != "fp32":
        # The names are the variants' (their fp32 build's tile and math); in this dtype each runs
        # the 16-bit GEMM of its BM and group, which is what differs between them.
        from kgen.tune.configs import HALF_WGMMA_BN, HALF_WGMMA_STAGES

        gemms = [s for s in specs if s.tile is not None]
        if gemms:
            echo(f"{stamp()} in {dtype} every GEMM candidate runs kgen's 16-bit GEMM (tile BM x {HALF_WGMMA_BN}, "
                 f"{HALF_WGMMA_STAGES} stages, fp32 accumulators); the names give the variant's fp32 build: "
                 + ", ".join(f"{s.name()} -> BM {s.tile.bm}, group {s.tile.group_m}, fusion {s.fusion}" for s in gemms))

    dropped: dict[Spec, str] = {}
    reserves: set[Spec] = set()   # built, measured only where nothing measured first passes (fallbacks)
    admissible = {t: set(FP32_ACCURATE_MATHS) for t in tols}
    eager: dict = {}
    if not exhaustive and dtype == "fp32":
        probe = probe_maths(problem, batch, in_features, out_features, sorted({s.math for s in specs}),
                            tols, "cuda", constants, eager)
        # The probe's fp64 copies of the module (tens of GB at 32768 x 32768) stay reserved by
        # this process's caching allocator unless handed back: the workers measuring the
        # candidates on the same GPU need that memory.
        import torch

        torch.cuda.empty_cache()
        beyond = [t for t in tols if t not in eager["within"]]
        if beyond:
            echo(f"{stamp()} note: eager fp32 is itself {eager['max_abs']:.1e} (max abs) from the fp64 "
                 f"result here, beyond tolerance {', '.join(f'{t:g}' for t in beyond)}: an ill-conditioned "
                 "module. kgen's gate judges against fp64 (no worse than eager); KernelBench's eval, which "
                 "compares with eager, can fail a result nearer the exact one")
        for math, (ok, why) in probe.items():
            for t in ok:
                admissible[t].add(math)
            verdict = f"meets {', '.join(f'{t:g}' for t in ok)}" if ok else "meets no requested tolerance"
            echo(f"{stamp()} probe {math}: {why}: {verdict}")
            if not ok:
                dropped.update({s: f"probe: {why}" for s in specs if s.math == math})
        live = [s for s in specs if s not in dropped]
        drops = cost_model_drops(live, admissible, sms)
        kept_back = fallbacks(live, drops, sms)
        dropped.update({s: why for s, why in drops.items() if s not in kept_back})
        # With other batches to serve the model's ranking at the search's batch says little
        # about them (measured: at 128 rows tf32x3 beats fp16x3, whose split of w it pays
        # whatever the rows): every kept candidate is measured.
        reserves = set() if also_batches else set(kept_back)
        if beyond:
            for s in keep_eagers_rounding(dropped):
                echo(f"{stamp()} kept {s.name()}: a plain cuBLAS fp32 GEMM and eager's order of "
                     "row sums, which can give eager's own rounding")
        echo(f"{stamp()} {len(specs) - len(dropped) - len(reserves)} candidates to measure, "
             + (f"{len(reserves)} more kept as the fallback{'s' if len(reserves) > 1 else ''}, measured only where "
                f"none of those passes ({', '.join(s.name() for s in reserves)}), " if reserves else "")
             + f"{len(dropped)} dropped (probe, cost model; --all keeps every spec)")

    cand_dir = work_dir / shape
    candidates: list[Candidate] = []
    for s in specs:
        if s in dropped:
            candidates.append(Candidate(s, cand_dir / f"{s.name()}.py", status="pruned", detail=dropped[s]))
            continue
        c = Candidate(s, generator.write(s, cand_dir / f"{s.name()}.py"))
        hit = cache.evaluation(s, device, tols, iters, dtype)
        if hit:
            c.record, c.status, c.detail, c.cached = dict(hit, path=str(c.path)), hit["status"], hit.get("detail", ""), True
        candidates.append(c)
    winners: dict = {}
    tol_tag = "_".join(f"{t:g}" for t in sorted(tols))
    dtype_tag = "" if dtype == "fp32" else f"_{dtype}"
    record_path = distinct_path(results_dir / f"search_{shape}_tol{tol_tag}{dtype_tag}.json", workload.sha256)
    results_dir.mkdir(parents=True, exist_ok=True)

    def current() -> dict:
        return {"search": shape, "problem": portable_problem(problem),
                "reference_sha256": workload.sha256, "constants": [list(c) for c in constants], "batch": batch, "in_features": in_features,
                "out_features": out_features, "arch": arch, "device": device, "tols": tols, "dtype": dtype,
                # which GPU measured what: each candidate's `gpu`, each winner's runoff and
                # full validation on `runoff_and_validation_gpu`
                "gpus": [{"index": i, "host_gpu": host_gpu(i), "name": names[i]} for i in gpus],
                "runoff_and_validation_gpu": home,
                "winners": winners, "candidates": [c.summary() for c in candidates]}

    def save():
        """Rewritten after every result, so an interrupted search keeps what it measured."""
        record = current()
        generator.write_atomic(record_path, json.dumps(record, indent=1))
        return record

    def contending(c: Candidate, tol: float):
        if on_contender:
            on_contender(dict(current(), winners={**winners, f"{tol:g}": {"name": c.spec.name()}},
                              record_path=str(record_path)))

    to_build = [c for c in candidates if c.status == "pending"]
    if all(c.spec in reserves for c in to_build):
        # (a rerun, every other candidate's measurement cached: the fallbacks are built, as they
        # are measured, only where they are needed; a build of a cached extension still costs a
        # Python process seconds)
        to_build = []
    cached = [c for c in candidates if c.cached]
    if cached:
        echo(f"{stamp()} {len(cached)} candidates measured before on this device (cache {cache.path})")
    lock = threading.Lock()

    def on_result(c: Candidate):
        cache.store_evaluation(c.spec, device, tols, iters, c.record, dtype)
        with lock:
            save()

    evaluator = Evaluator(tols, None, iters, eval_timeout, echo, on_result,
                          total=len([c for c in to_build if c.spec not in reserves]), gpus=gpus,
                          command=worker_command(tols, None, iters, dtype))

    def measure_reserves() -> bool:
        """The reserves not measured yet, measured now (built first where they are not), as
        nothing measured before passed a tier; whether there were any."""
        waiting = [c for c in candidates if c.status == "reserve"]
        if waiting:
            echo(f"{stamp()} measuring the fallback{'s' if len(waiting) > 1 else ''}: "
                 + ", ".join(c.spec.name() for c in waiting))
            unbuilt = [c for c in waiting if c not in to_build]

            def measure(c: Candidate):
                evaluator.total += 1   # (what is measured: a build that failed is not)
                evaluator.submit(c)

            for c in waiting:
                c.status, c.detail = ("pending" if c in unbuilt else "built"), ""
                if c not in unbuilt:
                    measure(c)
            build_all(unbuilt, jobs, build_timeout, echo,
                      on_built=lambda c: measure(c) if c.status == "built" else None, dtype=dtype)
            evaluator.drain()
        return bool(waiting)
    try:
        if to_build:
            echo(f"{stamp()} building {len(to_build)} candidates ({jobs} at a time); each is measured "
                 f"as soon as it is built{' (a fallback where needed)' if reserves & {c.spec for c in to_build} else ''}" + (f", by the first free of {len(gpus)} GPU workers" if len(gpus) > 1 else ""))
        build_all(to_build, jobs, build_timeout, echo,
                  on_built=lambda c: evaluator.submit(c) if c.status == "built" and c.spec not in reserves else None,
                  dtype=dtype)
        evaluator.drain()
        # The runoff and the full validations go to the first GPU's worker, warm from its candidates
        # (a subprocess would start Python, torch and CUDA again: seconds each; docs/perf.md,
        # session 25), or started for them where nothing was measured; evaluator.finish() at the end.
        home_worker = evaluator.worker_on(home)
        for c in candidates:
            if c.spec in reserves and c.status in ("built", "pending"):
                c.status, c.detail = "reserve", "measured only where nothing measured first passes (a fallback)"
        save()
        echo(results_table([c for c in candidates if c.status != "pruned"]))

        for tol in sorted(tols):
            failed_full: set[str] = set()   # (names) failed this tier's full validation in this search
            while True:   # (again after the fallbacks are measured: measure_reserves)
                passing = sorted((c for c in candidates if c.status == "passed" and tol in c.record["passing_tols"]
                                  and c.spec.name() not in failed_full),
                                 key=lambda c: c.measured["median_ms"])
                for c in passing:
                    c.runoff_ms = None   # a runoff of an earlier tier says nothing here
                    c.at_batches = {}
                contenders = runoff_contenders(passing)
                if contenders:
                    # A rerun of a search whose every measurement is cached takes the runoff's times
                    # too (the rerun then measures nothing: README's main job, rerun).
                    times, error = cache.runoff(contenders, device, dtype), ""
                    known = times is not None
                    if not known:
                        times, error = run_runoff(contenders, eval_timeout, home_worker)
                        if times is not None:
                            cache.store_runoff(contenders, device, times, dtype)
                    if times is None:
                        echo(f"{stamp()} tol {tol:g}: the runoff of the {len(contenders)} fastest failed ({error}); "
                             "keeping the order of their first measurements")
                    else:
                        ordered = runoff_order(contenders, times)
                        passing = ordered + [c for c in passing if c not in contenders]
                        echo(f"{stamp()} tol {tol:g}: {len(contenders)} candidates within {RUNOFF_MARGIN:.0%} of "
                             f"each other, timed again in {RUNOFF_ROUNDS} rounds, each right after eager {dtype} "
                             f"({statistics.median(times['eager']):.3f} ms"
                             + ("; in an earlier run on this device, cached" if known else "") + "): "
                             + ", ".join(f"{c.spec.name()} {c.runoff_ms:.3f} ms" for c in ordered))
                if also_batches and passing:
                    passing = rank_across_batches(passing, tol, also_batches, iters, eval_timeout, home_env, dtype, echo, stamp)
                for c in passing:
                    contending(c, tol)
                    if also_batches:
                        # every batch, the search's own first (its result is cached like any search's)
                        ok, log = True, ""
                        for b in also_batches:
                            echo(f"{stamp()} tol {tol:g}: full validation of {c.spec.name()} at batch {b}")
                            ok, log = full_validation(c.path, tol, eval_timeout * 3, home_worker, batch=b)
                            if not ok:
                                break
                        if not ok:
                            failed_full.add(c.spec.name())
                            c.record.setdefault("full_validation_failures", {})[f"{tol:g}"] = log[-2000:]
                            echo(f"{stamp()} tol {tol:g}: {c.spec.name()} failed full validation at batch {b}"
                                 f"{failed_checks(log)}; trying the next")
                            continue
                    if cache.full_validation(c.spec, device, tol, dtype):
                        ok, log = True, "cached"
                        echo(f"{stamp()} tol {tol:g}: {c.spec.name()} passed the full validation before on this device")
                    else:
                        echo(f"{stamp()} tol {tol:g}: full validation of {c.spec.name()}")
                        ok, log = full_validation(c.path, tol, eval_timeout * 3, home_worker)
                    if ok:
                        cache.store_full_validation(c.spec, device, tol, dtype)
                        measured = dict(c.measured, tol=tol, **({"runoff_ms": c.runoff_ms} if c.runoff_ms else {}),
                                        **({"at_batches": {str(b): m for b, m in c.at_batches.items()}}
                                           if c.at_batches else {}),
                                        # eager fp32 itself fails allclose(fp64) at this tol: ill-conditioned
                                        **({"eager_max_abs_err": eager["max_abs"]}
                                           if "max_abs" in eager and tol not in eager["within"] else {}))
                        out_dir.mkdir(parents=True, exist_ok=True)
                        path = generator.write(c.spec, distinct_path(winner_path(out_dir, c.spec, tol, dtype),
                                                                     c.spec.workload.sha256), measured=measured)
                        previous = record_winner(out_dir, path, c.spec, tol, measured, dtype)
                        winners[f"{tol:g}"] = {"name": c.spec.name(), "path": portable_problem(str(path)), "spec": portable_spec(c.spec),
                                               "measured": measured, "measured_on_gpu": c.record.get("gpu"),
                                               **({"runoff_gpu": home} if c.runoff_ms else {}),
                                               **({"full_validation_gpu": home} if log != "cached" else {})}
                        save()
                        runoff = f"; runoff {c.runoff_ms:.3f} ms" if c.runoff_ms else ""
                        # (an fp32 module's winner also against eager TF32: the relaxed tiers' yardstick)
                        tf32 = tf32_ratio(measured)
                        tf32 = f", {tf32:.3f}x eager TF32" if tf32 is not None else ""
                        echo(f"{stamp()} tol {tol:g}: fastest valid is {c.spec.name()} "
                             f"({measured['median_ms']:.3f} ms, {measured['ratio']:.3f}x eager {dtype}{tf32}{runoff}) -> {path}")
                        if vs_compile:
                            echo(f"{stamp()} tol {tol:g}: timing torch.compile of the reference (default and "
                                 "max-autotune) against the winner")
                            times, error = compare_with_compile(path, eval_timeout * 6, home_env, dtype)
                            winners[f"{tol:g}"]["vs_compile"] = times or {"error": error}
                            save()
                            echo(f"           {compile_line(times)}" if times else f"           no comparison: {error}")
                        if previous and previous.get("variant") != c.spec.name():
                            pm = previous.get("measured") or {}
                            echo(f"           replaced the earlier winner {previous.get('variant')} "
                                 f"({pm.get('median_ms', float('nan')):.3f} ms on {pm.get('device')}, {pm.get('date')})")
                        elif previous:
                            echo("           (the same variant as the earlier winner; its measurement is updated)")
                        break
                    failed_full.add(c.spec.name())
                    c.record.setdefault("full_validation_failures", {})[f"{tol:g}"] = log[-2000:]
                    echo(f"{stamp()} tol {tol:g}: {c.spec.name()} failed full validation{failed_checks(log)}; trying the next")
                else:
                    # Nothing passed this tier: the fallbacks, where there are any left to measure,
                    # then the tier again (what failed its full validation is not tried again).
                    if measure_reserves():
                        save()
                        echo(results_table([c for c in candidates if c.status != "pruned"]))
                        continue
                    echo(f"{stamp()} tol {tol:g}: no candidate passed")
                break
    finally:
        # (killed where the search raised or was interrupted: a worker mid-request is not waited for)
        evaluator.finish(kill=sys.exc_info()[1] is not None)
    echo(f"{stamp()} record: {record_path}")
    return dict(save(), record_path=str(record_path))
