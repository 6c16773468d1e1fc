"""What `kgen generate` emits when the user does not name a variant: the fastest fp32-accurate
file kgen knows for the target. First the winner of an earlier search for the same problem,
shape and target (from its results record); otherwise the fastest fp32-accurate GEMM family for
the target with tiles chosen by a rule that looks at the shape. Every choice comes with the
reason, which the command prints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kgen.frontend.problems import load
from kgen.frontend.reference import shipped_names
from kgen.lower.forward import rewritten
from kgen.tune.configs import (DEFAULT_ARCH, FILL_FRACTION, PRECISION_TOLERANCES, TYPICAL_SMS, fastest_family,
                               fused_stats_min_batch, launch_tiles, output_tiles, precision_name, rule_tiles,
                               work_units)
from kgen.tune.spec import ARCH_LIMITS, Spec, SpecError, Variant, Workload, arch_for_capability, gemm_family

RESULTS_DIR = Path("results")
# The records that ship with kgen: results/ of the checkout kgen runs from (an editable install
# or PYTHONPATH; a wheel has none, and the folder is then simply absent).
SHIPPED_RESULTS_DIR = Path(__file__).resolve().parents[2] / RESULTS_DIR


@dataclasses.dataclass(frozen=True)
class Target:
    arch: str
    sms: int
    why: str


def target(arch_option: str | None) -> Target:
    """--arch when given; else the local GPU; else DEFAULT_ARCH, saying so."""
    if arch_option:
        return Target(arch_option, TYPICAL_SMS[arch_option], f"--arch {arch_option}")
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        arch = arch_for_capability(props.major, props.minor)
        return Target(arch, props.multi_processor_count,
                      f"the local GPU, {props.name} (compute capability {props.major}.{props.minor})")
    return Target(DEFAULT_ARCH, TYPICAL_SMS[DEFAULT_ARCH],
                  f"no GPU here, so the default target {DEFAULT_ARCH} (Hopper); pass --arch for "
                  f"another ({', '.join(a for a in ARCH_LIMITS if a != DEFAULT_ARCH)})")


def record_sha256(record: dict, spec_dict: dict) -> str | None:
    """The sha256 of the reference a search record is about (records name it by content; a
    record of a shipped reference written before they did is matched by the shipped name)."""
    if record.get("reference_sha256"):
        return record["reference_sha256"]
    problem = spec_dict.get("problem", "")
    if problem in shipped_names():
        return load(problem).sha256
    return None


def results_dirs(problem: str, given: Path | None = None) -> list[Path]:
    """Where records of earlier searches are looked for: `given` (--results-dir) alone when
    named; else results/ in the working directory, beside the reference file and in each folder
    above it (a clone's tests/refs/x.py finds the clone's results/, from any working directory),
    and the records that ship with kgen. Records match by the reference's content, so a folder
    of other modules' records costs only the reading."""
    if given is not None:
        return [given]
    from kgen.frontend.problems import is_path

    dirs = [RESULTS_DIR]
    if is_path(problem):
        folder = Path(problem).resolve().parent
        dirs += [base / RESULTS_DIR for base in (folder, *folder.parents)]
    dirs.append(SHIPPED_RESULTS_DIR)
    unique: dict[Path, Path] = {}
    for d in dirs:
        if d.is_dir():
            unique.setdefault(d.resolve(), d)
    return list(unique.values())


def record_problem(record) -> str | None:
    """Why `record` (a search_*.json's JSON) is not a search record as kgen writes one, in the
    parts that choose reads (None where it is one): a dict whose `winners` map tolerances to
    dicts and whose `candidates` are a list."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    winners, candidates = record.get("winners") or {}, record.get("candidates") or []
    if not isinstance(winners, dict) or not isinstance(candidates, list):
        return "its winners are not a map of tolerances, or its candidates not a list"
    for tol, winner in winners.items():
        try:
            float(tol)
        except ValueError:
            return f"a winner's tolerance {tol!r} is not a number"
        if winner is not None and not isinstance(winner, dict):
            return f"its winner at {tol} is not a record"
    return None


def search_records(dirs: list[Path], on_skip=None):
    """(path, record) of every readable search record in `dirs`, in order; unreadable ones are
    skipped (a half-written or foreign file is not a record), each told to `on_skip(path, why)`
    where given."""
    for d in dirs:
        for path in sorted(d.glob("search_*.json")):
            try:
                record = json.loads(path.read_text())
                why = record_problem(record)
            except (OSError, UnicodeDecodeError) as e:
                why = f"cannot read it: {e}"
            except ValueError as e:
                why = f"not JSON: {e}"
            if why is None:
                yield path, record
            elif on_skip is not None:
                on_skip(path, why)


def known_winners(dirs: list[Path], on_skip=None) -> list[dict]:
    """Every tier's winner in the search records of `dirs`, one flat dict each (what `kgen
    winners` prints), ordered by problem, shape and tolerance; a file that is no record is told
    to `on_skip(path, why)`."""
    from kgen.frontend.problems import problem_name

    rows = []
    for path, record in search_records(dirs, on_skip):
        for tol, winner in (record.get("winners") or {}).items():
            if not isinstance(winner, dict):
                continue
            m = winner.get("measured") or {}
            problem = str(record.get("problem") or (winner.get("spec") or {}).get("problem") or "?")
            rows.append({
                "problem": problem_name(problem), "reference": problem,
                "reference_sha256": record.get("reference_sha256"),
                "batch": record.get("batch"), "in_features": record.get("in_features"),
                "out_features": record.get("out_features"),
                "constants": {name: value for name, value in record.get("constants") or []},
                "tol": float(tol), "dtype": record.get("dtype", "fp32"), "variant": winner.get("name"),
                "file": winner.get("path"),
                "median_ms": m.get("median_ms"), "ratio": m.get("ratio"), "eager_ms": m.get("eager_ms"),
                "max_abs_err": m.get("max_abs_err"), "arch": record.get("arch"),
                "device": m.get("device") or record.get("device"), "date": m.get("date"),
                "record": str(path)})
    return sorted(rows, key=lambda r: (r["problem"], r["batch"] or 0, r["in_features"] or 0,
                                       r["out_features"] or 0, sorted(r["constants"].items()), r["dtype"], r["tol"]))


def earlier_winner(problem: str, batch: int, in_features: int, out_features: int, arch: str,
                   results_dir: Path | None = None, constants: tuple = (),
                   dtype: str = "fp32") -> tuple[Spec, dict, Path] | None:
    """The fastest winner of an earlier search of this reference (by content: its sha256,
    wherever the file lies now), shape and target with the module in `dtype`, at that dtype's
    tolerance or tighter (fp32: fp32-accurate, tol <= 1e-4), re-made at today's code for the
    reference where it is now; None when there is none. Its measurement comes with the key of
    the code the search measured (`key`), which today's code may no longer have."""
    sha256 = load(problem, constants=constants).sha256
    workload = Workload(problem, batch, in_features, out_features, constants)
    best = None
    for path, record in search_records(results_dirs(problem, results_dir)):
        if record.get("dtype", "fp32") != dtype:
            continue  # a search of the module in another dtype
        candidates = [c for c in record.get("candidates") or [] if isinstance(c, dict)]
        specs_by_name = {c.get("name"): c.get("spec") for c in candidates}
        keys_by_name = {c.get("name"): c.get("key") for c in candidates}
        for tol, winner in (record.get("winners") or {}).items():
            if winner is None:
                continue   # (a tier no candidate passed)
            spec_dict = winner.get("spec") or specs_by_name.get(winner.get("name"))
            measured = dict(winner.get("measured") or {})
            if keys_by_name.get(winner.get("name")):
                measured["key"] = keys_by_name[winner.get("name")]
            if not spec_dict or float(tol) > PRECISION_TOLERANCES[dtype] or record_sha256(record, spec_dict) != sha256:
                continue
            try:
                spec = Spec.from_dict({**spec_dict, "problem": problem})
            except (SpecError, TypeError):
                continue  # a record of a variant today's kgen no longer makes
            same = spec.workload == workload and spec.arch == arch
            if same and (best is None or measured.get("median_ms", 1e9) < best[1].get("median_ms", 1e9)):
                best = (spec, measured, path)
    return best


def rule_fusion(workload: Workload, dtype: str = "fp32") -> tuple[int, str]:
    """The rule's fusion level for a module in `dtype`, and why. A BatchNorm module fuses its
    statistics into the GEMM from a batch that depends on the dtype (fused_stats_min_batch).
    Every other module keeps its point-wise chain in the GEMM's epilogue: since the chain runs as
    the tile is stored, by all the CTA's threads (session 30), fusion 0 (the chain in a kernel of
    its own) saves nothing in bf16 either. Measured on an H200 (docs/perf.md, session 32) on the
    eight KernelBench files whose chain calls exp / log / erf / tanh, which session 12's rule sent
    to fusion 0: fusion 1 was 0-5 % faster on six (70: 0.236 -> 0.223 ms, 53: 0.466 -> 0.448) and
    within 1.3 % on the other two. The 16-bit search still tries fusion 0 (search.half_variants)."""
    fused_from = fused_stats_min_batch(dtype)
    fusion = 2 if workload.batch >= fused_from else 1
    if any(part.batchnorms for part in workload.graph().parts):
        return fusion, f"fusion {fusion} (BatchNorm's statistics fused into the GEMM from batch {fused_from} in {dtype})"
    return fusion, f"fusion {fusion} (no BatchNorm: levels 1 and 2 are the same code)"


def shape_rule(problem: str, batch: int, in_features: int, out_features: int, target: Target,
               backend: str, math: str, fusion: int | None = None, constants: tuple = (),
               dtype: str = "fp32") -> tuple[Spec, str]:
    """The spec of a kgen GEMM family with tiles chosen by the shape: the largest tile of the
    family's list that the target admits and that still gives (nearly: FILL_FRACTION) every SM a
    unit of work (a tile, or a tile's k-split where the GEMM splits K: configs.work_units); a
    shape too small for that takes the tile that gives the most. Fusion by the batch (and the module's dtype)
    unless given."""
    family = gemm_family(backend, math)
    workload = Workload(problem, batch, in_features, out_features, constants)
    # The N of each GEMM the module runs: a pooled weight's is the pooling's width (lower.rewritten).
    parts = workload.graph().parts
    gemm_n = rewritten(parts[-1])[0].out_features
    tiles = rule_tiles(family, math, widest_n=max(rewritten(part)[0].out_features for part in parts))
    fusion_why = f"fusion {fusion}"
    if fusion is None:
        fusion, fusion_why = rule_fusion(workload, dtype)
    valid, refusals = [], []
    for tile in tiles:
        try:
            valid.append(Spec(workload, Variant(math=math, backend=backend, fusion=fusion, tile=tile,
                                                arch=target.arch)))
        except SpecError as e:
            refusals.append(str(e))
    if not valid:
        raise SpecError(f"no {family} {math} tile of kgen's list fits {target.arch}: " + refusals[0])

    def units(s: Spec) -> int:
        if dtype != "fp32":   # (a 16-bit module runs the 16-bit GEMM, which does not split K)
            return output_tiles(s.tile, batch, gemm_n)
        return work_units(family, math, s.tile, batch, in_features, gemm_n, target.sms)

    filling = [s for s in valid if units(s) >= FILL_FRACTION * target.sms]
    spec = filling[0] if filling else max(valid, key=units)
    t = spec.tile
    tiles = output_tiles(t, batch, gemm_n)
    # (the wgmma bf16 GEMM's CTA computes two tiles: configs.launch_tiles)
    ctas = tiles if dtype != "fp32" else launch_tiles(family, math, t, batch, gemm_n, in_features)
    split = units(spec) // ctas
    per_cta = f", {tiles // ctas} a CTA," if ctas < tiles else ""
    why = (f"tile {t.bm}x{t.bn}x{t.bk} ({tiles} tiles{per_cta}" + (f", each split {split} ways in K," if split > 1 else "")
           + f" for {target.sms} SMs), {fusion_why}")
    return spec, why


def module_dtype(problem: str, constants: tuple = ()) -> str:
    """PRECISIONS' name of the reference's input dtype (its get_inputs()): the dtype a user runs
    the module in; fp32 for any other."""
    return precision_name(load(problem, constants=constants).input.dtype)


def fastest_known(problem: str, batch: int, in_features: int, out_features: int, target: Target,
                  results_dir: Path | None = None, constants: tuple = (),
                  dtype: str | None = None) -> tuple[Spec, str, dict | None]:
    """(spec, why, measured): measured is the earlier search's measurement of the winner, with
    the record it comes from (`search_record`), for the file's header; None for the rule.
    `dtype`: the module's (default: its get_inputs()')."""
    from kgen.codegen.generator import half_gemm_type, sixteen_bit_builds

    # A module in bf16 / fp16 takes a search of it in that dtype first, then an fp32-accurate
    # winner whose file runs 16-bit modules on kgen's 16-bit GEMM (not a cuBLAS or SIMT one:
    # KernelBench 14's cuBLAS fp32 winner, chosen for eager's rounding, runs fp32 modules only;
    # nor the matrix-vector rewrite, whose 16-bit build never rounds z to the dtype as eager
    # does: where eager's 16-bit row sum is far from the exact one, as at KernelBench 18,
    # KernelBench's comparison with eager fails it, so only a search in that dtype, which
    # validates it, picks it).
    dtype = dtype or module_dtype(problem, constants)
    passed_over = ""
    for searched in dict.fromkeys((dtype, "fp32")):
        found = earlier_winner(problem, batch, in_features, out_features, target.arch, results_dir, constants,
                               searched)
        if found and dtype != "fp32" and searched == "fp32" and half_gemm_type(found[0]) is None:
            passed_over = (f"the fp32 search's winner ({found[2]}) "
                           + ("is the matrix-vector rewrite, whose 16-bit build only a search in that dtype picks"
                              if sixteen_bit_builds(found[0]) else "runs fp32 modules only")
                           + f", and no search of the module in {dtype} is recorded")
            found = None
        if found:
            spec, measured, path = found
            ms = measured.get("median_ms")
            ratio = measured.get("ratio")
            numbers = (f": {ms:.3f} ms, {ratio:.3f}x eager {searched} on {measured.get('device')}"
                       if ms and ratio else "")
            which = "fp32-accurate winner" if searched == "fp32" else f"winner in {searched}"
            why = f"the {which} of an earlier search ({path}){numbers}"
            if searched != dtype:
                why += _sixteen_bit_build(dtype)
            fusion, fusion_why = rule_fusion(spec.workload, dtype)
            # (Without BatchNorm levels 1 and 2 are the same code, and the rule never picks 0.)
            changes_code = any(part.batchnorms for part in spec.workload.graph().parts)
            if searched != dtype and spec.fusion != fusion and changes_code:
                # The fp32 search measured its fusion level in fp32; a 16-bit module's follows the
                # rule measured in 16 bits.
                spec = Spec(spec.workload, dataclasses.replace(spec.variant, fusion=fusion))
                why += (f"; for a {dtype} module at batch {batch}, {fusion_why}: the rule's, measured "
                        "in 16 bits (this variant itself unmeasured)")
                return spec, why, None
            return spec, why, dict(measured, search_record=str(path))
    from kgen.frontend.problems import graph
    from kgen.ir.rewrite import row_sum_of_gemm, simplify

    backend, math = fastest_family(target.arch, batch, in_features, out_features, target.sms)
    spec, why = shape_rule(problem, batch, in_features, out_features, target, backend, math,
                           constants=constants, dtype=dtype)
    family = ("warp-specialized wgmma GEMM on three fp16 products (fp16x3)" if math == "fp16x3" else
              "3xTF32 warp-specialized wgmma GEMM" if backend == "wgmma" else "3xTF32 mma.sync GEMM")
    # The matrix-vector rewrite changes the rounding (where eager fp32 is itself far from the
    # exact sums, KernelBench's comparison with eager can fail it: KernelBench 14), so only a
    # search, which validates it on the GPU, picks it.
    rewrite = ("; the matrix-vector rewrite also applies (`--backend gemv`), and `kgen search` "
               "tries it" if row_sum_of_gemm(simplify(graph(problem, batch, in_features, out_features,
                                                           constants))[0]) is not None else "")
    sixteen = _sixteen_bit_build(dtype) if half_gemm_type(spec) is not None else ""
    return spec, (f"{passed_over or 'no earlier search for this shape and target'}, so the fastest "
                  f"fp32-accurate family for {target.arch} at this shape, kgen's {family}; {why}{rewrite}{sixteen}"), None


def _sixteen_bit_build(dtype: str) -> str:
    """What `kgen generate` adds where a 16-bit module takes an fp32-accurate variant's file: it
    runs none of that family's fp32 arithmetic, but the file's 16-bit build."""
    return (f"; a {dtype} module runs the file's 16-bit build (kgen's wgmma GEMM on {dtype} operands: the "
            "header's `16-bit:` line)" if dtype != "fp32" else "")
