"""Spec -> emitted ModelNew file: render the templates, write atomically."""

from __future__ import annotations

import os
import pprint
import tempfile
from pathlib import Path

import jinja2

from . import __version__
from .problems import get_problem
from .spec import CUBLAS_COMPUTE_TYPES, FUSION_LEVELS, KGEN_DIR, WGMMA_FLUSH_KTILES, Spec, cta_threads

KERNEL_SOURCES = {
    "api": "api.h",
    "common": "common.cuh",
    "bn": "bn.cuh",
    "gemm_simt": "gemm_simt.cuh",
    "gemm_mma": "gemm_mma.cuh",
    "gemm_wgmma": "gemm_wgmma.cuh",
    "gemm_wgmma_ws": "gemm_wgmma_ws.cuh",
    "forward": "forward.cuh",
    "cublas_gemm": "cublas_gemm.cpp",
    "binding": "binding.cpp",
}
# The GEMM library each family's kernel translation unit inlines, in order (the wgmma GEMMs
# build on the mma.sync file's loader, swizzle and tf32 helpers; the warp-specialized one on
# gemm_wgmma.cuh's wgmma wrappers, and falls back to its kernel when TMA cannot load x or w).
GEMM_SOURCES = {
    "simt": ("gemm_simt",),
    "mma": ("gemm_mma",),
    "wgmma": ("gemm_mma", "gemm_wgmma", "gemm_wgmma_ws"),
    "cublas": (),
}
PROBLEM_ENUMS = {"gemm_scale_bn": "kGemmScaleBn", "gemm_bn_scale_softmax": "kGemmBnScaleSoftmax"}
MMA_MATH_ENUMS = {"tf32x3": "kTF32x3", "tf32": "kTF32", "bf16": "kBF16"}
DEFAULT_OUTPUT_DIR = Path("generated")

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(KGEN_DIR / "templates")),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)


def kernel_sources() -> dict[str, str]:
    """The kernel library, ready to inline: the emitted file holds one translation unit, so the
    include guards of the separate files have nothing to guard."""
    out = {}
    for key, filename in KERNEL_SOURCES.items():
        path = KGEN_DIR / "kernels" / filename
        text = path.read_text() if path.exists() else ""
        out[key] = text.replace("#pragma once\n", "").strip() + "\n"
    return out


def gemm_type(spec: Spec) -> str:
    t = spec.tile
    if spec.family == "simt":
        return f"kgen::SimtGemm<{t.bm}, {t.bn}, {t.bk}, {t.wm}, {t.wn}, {t.tm}, {t.tn}, {t.group_m}>"
    if spec.family == "mma":
        return (f"kgen::MmaGemm<kgen::MathMode::{MMA_MATH_ENUMS[spec.math]}, {t.bm}, {t.bn}, {t.bk}, "
                f"{t.wm}, {t.wn}, {t.stages}, {t.group_m}>")
    if spec.family == "wgmma":
        return (f"kgen::WgmmaWsGemm<kgen::MathMode::{MMA_MATH_ENUMS[spec.math]}, {t.bm}, {t.bn}, "
                f"{t.stages}, {WGMMA_FLUSH_KTILES}, {t.group_m}>")
    return "kgen::ExternalGemm"


def _source_context(spec: Spec) -> dict:
    return {
        "version": __version__,
        "spec_name": spec.name(),
        "family": spec.family,
        "fusion": spec.fusion,
        "tile": spec.tile,
        "problem_enum": PROBLEM_ENUMS[spec.problem],
        "gemm_type": gemm_type(spec),
        "cublas_compute": CUBLAS_COMPUTE_TYPES.get(spec.math, ""),
        "sources": (sources := kernel_sources()),
        "gemm_sources": [sources[name] for name in GEMM_SOURCES[spec.family]],
    }


def render_cuda_source(spec: Spec) -> str:
    return _ENV.get_template("kernel.cu.j2").render(**_source_context(spec))


def render_cpp_source(spec: Spec) -> str:
    return _ENV.get_template("binding.cpp.j2").render(**_source_context(spec))


def generate_command(spec: Spec) -> str:
    """The `kgen generate` command line that reproduces this spec."""
    parts = ["kgen generate", f"--problem {spec.problem}", f"--batch {spec.batch}",
             f"--in {spec.in_features}", f"--out {spec.out_features}", f"--math {spec.math}",
             f"--backend {spec.backend}", f"--fusion {spec.fusion}"]
    t = spec.tile
    if t is not None:
        parts += [f"--tile {t.bm}x{t.bn}x{t.bk}", f"--warp {t.wm}x{t.wn}"]
        parts.append(f"--thread {t.tm}x{t.tn}" if t.tm else f"--stages {t.stages}")
        parts.append(f"--group {t.group_m}")
    if spec.arch != "sm_90a":
        parts.append(f"--arch {spec.arch}")
    return " ".join(parts)


def describe_variant(spec: Spec) -> list[str]:
    if spec.family == "cublas":
        gemm = f"cuBLAS GEMM ({CUBLAS_COMPUTE_TYPES[spec.math]})"
    elif spec.family == "simt":
        gemm = "kgen SIMT GEMM (fp32 FFMA)"
    elif spec.family == "wgmma":
        gemm = (f"kgen Hopper tensor-core GEMM (wgmma, {spec.math}; warp-specialized: a TMA "
                f"producer warpgroup feeds {spec.tile.bm // 64} consumer warpgroup(s))")
    else:
        gemm = f"kgen tensor-core GEMM (mma.sync, {spec.math})"
    lines = [f"variant:   {gemm}; fusion {spec.fusion}: {FUSION_LEVELS[spec.fusion]}"]
    t = spec.tile
    if t is not None:
        detail = f"thread {t.tm}x{t.tn}" if t.tm else f"{t.stages} stages"
        lines.append(f"tile:      CTA {t.bm}x{t.bn}x{t.bk}, warp {t.wm}x{t.wn}, {detail}, "
                     f"raster group {t.group_m}, {cta_threads(spec.family, t)} threads")
    return lines


def describe_measured(measured: dict | None) -> list[str]:
    if not measured:
        return ["measured:  nothing yet (not from a search); run `kgen validate` and `kgen bench`"]
    m = measured
    return [
        f"measured:  {m['device']}, {m['date']}, batch {m['batch']}, tol {m['tol']:g}",
        f"           {m['median_ms']:.3f} ms median (p20 {m['p20_ms']:.3f}, p80 {m['p80_ms']:.3f}); "
        f"eager fp32 reference {m['eager_ms']:.3f} ms in the same run -> {m['ratio']:.3f}x its time",
        f"           max abs error vs fp64 {m['max_abs_err']:.2e}, max rel {m['max_rel_err']:.2e}",
    ]


def render_header(spec: Spec, measured: dict | None) -> str:
    problem = get_problem(spec.problem)
    lines = [
        f"ModelNew for {spec.problem}: {problem.title}.",
        "",
        f"Generated by kgen {__version__}. Do not edit; regenerate with:",
        f"    {generate_command(spec)}",
        "",
        f"problem:   {spec.problem} (KernelBench level 2: {', '.join(problem.kernelbench)})",
        f"shapes:    batch {spec.batch} (any batch works), in_features {spec.in_features}, "
        f"out_features {spec.out_features}",
        *describe_variant(spec),
        f"target:    {spec.arch} (the extension is built for the GPU it runs on)",
        f"key:       {spec.key()}",
        *describe_measured(measured),
    ]
    return "\n".join(lines)


def render(spec: Spec, measured: dict | None = None) -> str:
    problem = get_problem(spec.problem)
    cuda_source = render_cuda_source(spec)
    cpp_source = render_cpp_source(spec)
    for text in (cuda_source, cpp_source):
        # The sources sit in raw triple-quoted strings.
        if "'''" in text:
            raise ValueError("kernel source contains ''' and cannot be embedded")
    return _ENV.get_template("model_new.py.j2").render(
        header=render_header(spec, measured),
        spec=spec,
        spec_literal=pprint.pformat(spec.to_dict(), sort_dicts=True, width=100),
        measured_literal=pprint.pformat(measured, sort_dicts=True, width=100),
        init_args=repr(list(problem.init_args(spec.in_features, spec.out_features))),
        extension_name=spec.extension_name(),
        hopper_only=spec.family == "wgmma",
        extra_ldflags=repr(["-lcublas"] if spec.family == "cublas" else []),
        cuda_source=cuda_source,
        cpp_source=cpp_source,
        problem=problem,
        init_source=problem.init_source(),
    )


def default_path(spec: Spec) -> Path:
    return DEFAULT_OUTPUT_DIR / f"{spec.name()}.py"


def write_atomic(path: Path, text: str) -> Path:
    """Write via a temporary file in the same directory and rename: a reader (or a crash)
    never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def write(spec: Spec, path: Path | None = None, measured: dict | None = None) -> Path:
    return write_atomic(path or default_path(spec), render(spec, measured))
