"""Specifications: everything that decides the text of an emitted file.

A Spec is a Workload (the reference, by path or shipped name, at a shape and with its `--set`
constants) and a Variant (the code: GEMM backend, math mode, tile, fusion level, target). Each
half is validated when it is made (shapes; admissible combinations, tile divisibility,
shared-memory and register budgets), so every Spec that exists renders, compiles and launches.
Its key() hashes the CUDA source it renders to and names the extension build; what kgen
remembers of a workload is keyed by the reference's content (Workload.sha256), not its path.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path


MATH_MODES = ("fp32_simt", "tf32x3", "fp16x3", "tf32", "bf16", "fp16")
# kgen: kgen's portable GEMMs (sm_80 and newer), SIMT for fp32_simt, mma.sync otherwise.
# wgmma: kgen's Hopper GEMM (sm_90a only). cublas: cuBLAS computes the GEMM, kgen the rest.
# gemv: no GEMM at all: a sum over the features of the GEMM output (scaled and shifted per
# feature) computed as a matrix-vector product (kgen/ir/rewrite.py, row_sum_of_gemm; fp32).
BACKENDS = ("kgen", "wgmma", "cublas", "gemv")
WGMMA_MATHS = ("tf32x3", "fp16x3", "tf32", "bf16", "fp16")
# The math modes of kgen's Hopper GEMM alone (no mma.sync, SIMT or cuBLAS variant computes them).
WGMMA_ONLY_MATHS = ("fp16x3", "fp16")
# The fp32-accurate math modes: each product as accurate as fp32's (fp32 FMAs, or split operands
# whose partial sums are flushed into fp32 accumulators).
FP32_ACCURATE_MATHS = ("fp32_simt", "tf32x3", "fp16x3")
# The wgmma math modes that keep a partial accumulator beside the main one (twice the
# accumulator registers, so tiles at most 128 wide).
PARTIAL_SUM_MATHS = ("tf32x3", "fp16x3")
# fp16x3 (kernels/gemm_wgmma_f16x3.cuh): the wgmma GEMM on three fp16 products of operands split
# and scaled per row in a pass of their own. It reads k in steps of 8 fp16 (16-byte TMA rows): a
# GEMM part whose K is not a multiple of 8, and the backward's GEMMs, run tf32x3 (gemm_type).
FP16X3_K_MULTIPLE = 8
# k-tiles of 32 summed in one tf32x3 partial accumulator of the wgmma GEMM before it is added to
# the main one (FLUSH in gemm_wgmma.cuh; docs/perf.md has the error/time trade-off).
WGMMA_FLUSH_KTILES = 2
# fp16x3's k-tiles are 64 deep (128-byte rows of fp16): partial sums of 128 k, which measured as
# accurate as tf32x3's 64 and 4 % faster than flushing every k-tile (docs/perf.md, session 21).
FP16X3_FLUSH_KTILES = 2
# fp16x3 on a square tile splits w in the GEMM's registers, not in the pass before it, at batches
# up to this many rows (W_IN_REGISTERS_MAX_ROWS of kernels/gemm_wgmma_f16x3.cuh, which the
# generator passes): there the pass over w costs more than that GEMM's slower mainloop. The pass
# keeps w's split from call to call (session 50: 4 bytes of w read a call while w is unchanged,
# where it moved 8), which moved the break-even down from session 22's 512 (measured then against
# the 8 bytes). Measured on an H200 (docs/perf.md, session 51; device us of a forward's kernels,
# w in registers / the kept split's pass): 1024 x 8192 -> 8192's file at 256 rows 217 / 228, at
# 384 418 / 358, at 512 411 / 370; 128 x 32768 -> 32768's at 256 rows 3334 / 3738, at 512 7080 /
# 6536.
FP16X3_W_IN_REGISTERS_MAX_ROWS = 256
# The stages of the tf32x3 GEMM that an fp16x3 variant's other GEMMs run (the tf32x3 rule's).
FP16X3_TF32X3_STAGES = 4
# bf16 and fp16 on the wgmma backend (kernels/gemm_wgmma_round16.cuh): 16-bit products of fp32
# operands (math -> the products' CUDA type), x rounded by a pass into 16-byte TMA rows (K a
# multiple of 8), w in the GEMM's registers; its tile is 128 x 128 (two a CTA: 256 rows of x; one
# at batches of at most 128 rows). A GEMM part whose K is not a multiple of 8, and the backward's
# GEMMs, run tf32 on the same tile in ROUND16_TF32_STAGES stages (generator.gemm_type). fp16 keeps
# TF32's 11 significant bits (bf16 8) within fp16's range (|v| <= 65504).
ROUND16_MATHS = {"bf16": "__nv_bfloat16", "fp16": "__half"}
ROUND16_K_MULTIPLE = 8
ROUND16_TF32_STAGES = 6
FUSION_LEVELS = {
    0: "GEMM writes the Linear's output; the point-wise chain after it in a kernel of its own",
    1: "GEMM writes z; column statistics in a separate kernel",
    2: "column statistics fused into the GEMM epilogue",
}
# Per target: the compute capabilities it stands for, the most shared memory one CTA may opt in
# to (bytes; CUDA C Programming Guide, "Technical Specifications per Compute Capability") and
# the registers per SM. The one table of these limits: the spec checks tiles against it, and the
# kernel source of every variant carries its target's smem limit as kgen_cfg::kMaxSmemBytes,
# which static_asserts the GEMM's own kSmemBytes against it (kernel.cu.j2, forward.cuh).
# Hopper's architecture-specific target: the only one with wgmma (kgen's fastest GEMM).
WGMMA_ARCH = "sm_90a"
ARCH_LIMITS = {
    "sm_80": {"capabilities": ((8, 0),), "smem": 166912, "regs": 65536},
    "sm_86": {"capabilities": ((8, 6),), "smem": 101376, "regs": 65536},
    "sm_87": {"capabilities": ((8, 7),), "smem": 166912, "regs": 65536},
    "sm_89": {"capabilities": ((8, 9),), "smem": 101376, "regs": 65536},
    "sm_90a": {"capabilities": ((9, 0),), "smem": 232448, "regs": 65536},
    "sm_100": {"capabilities": ((10, 0), (10, 3)), "smem": 232448, "regs": 65536},
    "sm_120": {"capabilities": ((12, 0), (12, 1)), "smem": 101376, "regs": 65536},
}
# A GPU whose capability the table does not list gets the smallest limits of the table.
FALLBACK_ARCH = "sm_120"
# Elements per tensor: the kernels index rows with 32-bit ints (M, N, K < 2**31) and whole
# tensors with size_t, but an input, weight or output of more than 2**31 elements (8 GiB of
# fp32) is surely a typo (`--batch 1000000000` would make get_inputs() ask for 32 TB).
MAX_TENSOR_ELEMENTS = 2**31
# Static shared memory the epilogue adds on top of the dynamic buffers (tile_column_stats' red[]).
EPILOGUE_STATIC_SMEM = 4 * 1024  # >= 4 bytes per thread



def arch_for_capability(major: int, minor: int) -> str:
    """The target whose limits and instructions a GPU of this compute capability admits: Hopper
    (9.0) gets sm_90a (wgmma, 227 KB of shared memory); sm_86 / sm_89 / sm_120 their 99 KB."""
    for arch, limits in ARCH_LIMITS.items():
        if (major, minor) in limits["capabilities"]:
            return arch
    return FALLBACK_ARCH


KGEN_DIR = Path(__file__).resolve().parents[1]  # the kgen package


class SpecError(ValueError):
    """A specification that cannot be built; the message says which constraint failed."""


@dataclasses.dataclass(frozen=True)
class Tile:
    """CTA tile BM x BN x BK, warp tile WM x WN; SIMT thread tile TM x TN; MMA pipeline stages;
    GROUP_M tile-rows per rasterization group (L2 reuse)."""

    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    tm: int = 0
    tn: int = 0
    stages: int = 0
    group_m: int = 8

    @property
    def threads(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn) * 32

    def name(self) -> str:
        s = f"t{self.bm}x{self.bn}x{self.bk}_w{self.wm}x{self.wn}"
        if self.tm:
            s += f"_r{self.tm}x{self.tn}"
        if self.stages:
            s += f"_s{self.stages}"
        return s + f"_g{self.group_m}"


def gemm_family(backend: str, math: str) -> str:
    """Which mainloop a (backend, math) pair uses: 'simt', 'mma', 'wgmma', 'cublas' or 'gemv'."""
    if backend in ("cublas", "wgmma", "gemv"):
        return backend
    return "simt" if math == "fp32_simt" else "mma"


def epilogue_smem_bytes(tile: Tile) -> int:
    return tile.bm * (tile.bn + 4) * 4


def simt_smem_bytes(tile: Tile) -> int:
    """Mirrors SimtGemm::kSmemBytes: two stages of transposed A and B tiles, or the epilogue."""
    mainloop = 2 * tile.bk * ((tile.bm + 4) + (tile.bn + 4)) * 4
    return max(mainloop, epilogue_smem_bytes(tile))


def mma_smem_bytes(tile: Tile) -> int:
    """Mirrors MmaGemm::kSmemBytes: STAGES swizzled K-major A and B tiles, or the epilogue."""
    mainloop = tile.stages * (tile.bm + tile.bn) * tile.bk * 4
    return max(mainloop, epilogue_smem_bytes(tile))


def wgmma_threads(tile: Tile) -> int:
    """Mirrors WgmmaWsGemm::kThreads: a producer warpgroup plus one consumer warpgroup per 64
    rows of BM."""
    return 128 * (1 + tile.bm // 64)


def cta_threads(family: str, tile: Tile) -> int:
    """Threads per CTA of a kgen GEMM: the warp grid of the tile, plus the wgmma GEMM's
    producer warpgroup."""
    return wgmma_threads(tile) if family == "wgmma" else tile.threads


def wgmma_smem_bytes(tile: Tile, math: str) -> int:
    """Mirrors WgmmaWsGemm::kSmemBytes (and WgmmaWsF16x3Gemm's, WgmmaWsRound16Gemm's): STAGES stages
    of 128-byte rows of A, B and (tf32x3) B's small part (fp16x3: hi and lo of A and of B, or on
    square tiles w's fp32 in A's bytes), or the epilogue tile; three mbarriers per stage (fp16x3,
    bf16, fp16: two); 1024 bytes to align to the swizzle atom."""
    if math in ROUND16_MATHS:
        # w's fp32 BN rows are two 128-byte rows each, x's rows of 16 bits one each: 2 BM of them
        # in the CTA of two tiles, BM in the one of a tile (batches up to BM rows), which takes as
        # many stages as fit the other's bytes (WgmmaWsRound16Gemm::kNarrowStages).
        wide, narrow = 2 * tile.bn + 2 * tile.bm, 2 * tile.bn + tile.bm
        narrow_stages = tile.stages * wide // narrow
        return max(max(stages * rows * 128, epilogue_smem_bytes(tile)) + 2 * stages * 8 + 1024
                   for stages, rows in ((tile.stages, wide), (narrow_stages, narrow)))
    rows = {"tf32x3": tile.bm + 2 * tile.bn, "fp16x3": 2 * (tile.bm + tile.bn)}.get(math, tile.bm + tile.bn)
    mainloop = tile.stages * rows * 128
    barriers = 2 if math == "fp16x3" else 3   # (full and empty; no B preparation)
    return max(mainloop, epilogue_smem_bytes(tile)) + barriers * tile.stages * 8 + 1024


def wgmma_fallback_smem_bytes(tile: Tile, math: str) -> int:
    """Mirrors WgmmaGemm::kSmemBytes for WgmmaWsGemm's fallback (K % 4 != 0, no TMA): at least
    4 stages of A and B, three small-part buffers of B (tf32x3), or the epilogue; + 1024."""
    stages = max(tile.stages, 4)
    mainloop = (stages * (tile.bm + tile.bn) + (3 * tile.bn if math == "tf32x3" else 0)) * 128
    return max(mainloop, epilogue_smem_bytes(tile)) + 1024


def check_shape(batch: int, in_features: int, out_features: int) -> None:
    """Refuses a shape whose input, weight or output would exceed MAX_TENSOR_ELEMENTS."""
    for what, rows, cols in (("the input x", batch, in_features),
                             ("gemm.weight", out_features, in_features),
                             ("the output", batch, out_features)):
        _check(rows * cols <= MAX_TENSOR_ELEMENTS,
               f"{what} would be {rows} x {cols} = {rows * cols:,} elements "
               f"({rows * cols * 4 / 2**30:,.0f} GiB of fp32); kgen allows up to "
               f"{MAX_TENSOR_ELEMENTS:,} per tensor")


def gemm_smem_bytes(family: str, math: str, tile: Tile) -> int:
    """Shared memory one CTA of a kgen GEMM needs on its largest path (the wgmma GEMM's fallback
    included), with the epilogue's static scratch: what ARCH_LIMITS' smem must admit."""
    if family == "wgmma" and math == "fp16x3":
        # (Its parts whose K is not a multiple of 8 run tf32x3 on the same tile, 4 stages.)
        tf32x3 = dataclasses.replace(tile, stages=FP16X3_TF32X3_STAGES)
        smem = max(wgmma_smem_bytes(tile, math), wgmma_smem_bytes(tf32x3, "tf32x3"),
                   wgmma_fallback_smem_bytes(tf32x3, "tf32x3"))
    elif family == "wgmma" and math in ROUND16_MATHS:
        # (Its backward's GEMMs, and a part whose K is not a multiple of 8, run tf32 on the tile.)
        tf32 = dataclasses.replace(tile, stages=ROUND16_TF32_STAGES)
        smem = max(wgmma_smem_bytes(tile, math), wgmma_smem_bytes(tf32, "tf32"),
                   wgmma_fallback_smem_bytes(tf32, "tf32"))
    elif family == "wgmma":
        smem = max(wgmma_smem_bytes(tile, math), wgmma_fallback_smem_bytes(tile, math))
    elif family == "simt":
        smem = simt_smem_bytes(tile)
    else:
        smem = mma_smem_bytes(tile)
    return smem + EPILOGUE_STATIC_SMEM


def spec_smem_bytes(spec: "Spec") -> int:
    return 0 if spec.tile is None else gemm_smem_bytes(spec.family, spec.math, spec.tile)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise SpecError(message)


def _validate_tile(family: str, math: str, t: Tile, arch: str) -> None:
    for field in ("bm", "bn", "bk", "wm", "wn", "group_m"):
        _check(getattr(t, field) > 0, f"tile {field} must be positive, got {getattr(t, field)}")
    # The CTA tile first, so that a bad tile is blamed on the tile, not on a warp tile the
    # command line derived from it. Every family's warps own multiples of 16 rows and 8 columns.
    _check(t.bm % 16 == 0, f"BM={t.bm} must be a multiple of 16")
    _check(t.bn % 8 == 0, f"BN={t.bn} must be a multiple of 8")
    _check(t.bk % 8 == 0, f"BK={t.bk} must be a multiple of 8")
    _check(t.bm % t.wm == 0, f"BM={t.bm} must be a multiple of WM={t.wm}")
    _check(t.bn % t.wn == 0, f"BN={t.bn} must be a multiple of WN={t.wn}")
    limits = ARCH_LIMITS[arch]
    threads = cta_threads(family, t)
    _check(32 <= threads <= 1024, f"tile gives {threads} threads per CTA; need 32..1024")
    # tile_column_stats spreads BN columns over the CTA's threads (threads beyond a multiple of
    # BN idle), so BN > threads must be a multiple of threads.
    _check(t.bn % min(t.bn, threads) == 0,
           f"BN={t.bn} must be a multiple of the CTA's {threads} threads for the statistics epilogue")
    if family == "wgmma":
        # Mirrors the static_asserts of WgmmaWsGemm (kgen/codegen/kernels/gemm_wgmma_ws.cuh): each
        # consumer warpgroup of 4 warps owns 64 rows x BN, so the warp tile is 16 x BN.
        _check(arch == WGMMA_ARCH, f"the wgmma GEMM runs on {WGMMA_ARCH} only, not {arch}")
        _check(t.tm == 0 and t.tn == 0, "wgmma tiles have no thread tile")
        _check(t.bk == 32, f"wgmma tiles have BK=32 (one 128-byte swizzled row), got {t.bk}")
        _check(t.bm in (64, 128), f"wgmma BM must be 64 or 128 (one or two warpgroups), got {t.bm}")
        bns = (64, 128) if math in PARTIAL_SUM_MATHS else (64, 128, 256)
        _check(t.bn in bns, f"wgmma {math} BN must be one of {bns}, got {t.bn}")
        _check((t.wm, t.wn) == (16, t.bn), f"wgmma warp tile is 16xBN = 16x{t.bn}, got {t.wm}x{t.wn}")
        _check(t.stages >= 2, f"wgmma tiles need >= 2 pipeline stages, got {t.stages}")
        # Accumulators (and tf32x3's partial ones) plus ~36 (ptxas: 128x128 tf32x3 162,
        # 128x256 tf32 164, 64-row tiles ~100).
        regs = t.bn // 2 * (2 if math in PARTIAL_SUM_MATHS else 1) + 36
        if math in ROUND16_MATHS:
            # WgmmaWsRound16Gemm: two 128 x 128 tiles a CTA, z's transposed (2 BM rows of x as
            # wgmma's N: BM accumulators a thread), w's fragments in two register sets of 8.
            _check(t.bm == 128 and t.bn == 128, f"wgmma {math} tiles are 128x128, got {t.bm}x{t.bn}")
            regs = t.bm + 16 + 24
    elif family == "simt":
        # Mirrors the static_asserts of SimtGemm (kgen/codegen/kernels/gemm_simt.cuh).
        _check(t.tm > 0 and t.tn > 0 and t.stages == 0,
               "SIMT tiles need a thread tile (TM, TN) and no stages")
        _check(t.wm % t.tm == 0 and t.wn % t.tn == 0,
               f"warp tile {t.wm}x{t.wn} must be a multiple of thread tile {t.tm}x{t.tn}")
        _check((t.wm // t.tm) * (t.wn // t.tn) == 32,
               f"warp tile {t.wm}x{t.wn} / thread tile {t.tm}x{t.tn} must give 32 threads")
        _check(t.tm % 4 == 0 and t.tn % 4 == 0, "TM and TN must be multiples of 4 (float4 reads)")
        _check(t.tm * t.tn <= 128, f"thread tile {t.tm}x{t.tn} holds more than 128 accumulators")
        _check(t.bk % 8 == 0, f"BK={t.bk} must be a multiple of 8")
        _check(t.bm % 16 == 0 and t.bn % 16 == 0, "BM and BN must be multiples of 16")
        for rows, what in ((t.bm, "BM"), (t.bn, "BN")):
            _check((rows * t.bk) % (4 * t.threads) == 0,
                   f"{t.threads} threads cannot split a {rows}x{t.bk} stage into float4 loads")
            for lanes in (t.threads // 2, t.threads // 8):  # vector and scalar loader layouts
                _check(rows % lanes == 0 or lanes % rows == 0,
                       f"{what}={rows} does not fit the loader layout of {t.threads} threads")
        # SimtGemm's launch bounds: 128 registers per thread for thread tiles up to 8x8, else 255.
        regs = 128 if t.tm * t.tn <= 64 else 255
    else:
        # Mirrors the static_asserts of MmaGemm (kgen/codegen/kernels/gemm_mma.cuh).
        _check(t.stages >= 2 and t.tm == 0 and t.tn == 0,
               "MMA tiles need >= 2 pipeline stages and no thread tile")
        _check(t.wm % 16 == 0 and t.wn % 8 == 0,
               f"warp tile {t.wm}x{t.wn} must be a multiple of the 16x8 mma tile")
        _check(t.bk in (16, 32, 64), f"BK={t.bk} must be 16, 32 or 64 (the swizzled row layouts)")
        _check(t.threads % t.bk == 0, f"{t.threads} threads must be a multiple of BK={t.bk}")
        # The launch bounds give a CTA of more than 256 threads too few registers for the
        # accumulators and split fragments: it would spill.
        _check(t.threads <= 256, f"tile gives {t.threads} threads; tensor-core tiles allow at most 256")
        if math == "tf32x3":
            _check(t.wm * t.wn <= 64 * 32,
                   f"tf32x3 keeps a second (partial) accumulator: warp tile {t.wm}x{t.wn} exceeds 2048 elements")
        # Accumulators plus fragments and addressing (ptxas: 64x32 warp tile 162, 64x64 ~246).
        regs = t.wm * t.wn // 32 * (2 if math == "tf32x3" else 1) + 100
    smem_total = gemm_smem_bytes(family, math, t)
    _check(smem_total <= limits["smem"],
           f"tile needs {smem_total} bytes of shared memory; {arch} allows {limits['smem']}")
    _check(regs <= 255, f"tile needs about {regs} registers per thread; the limit is 255")
    _check(regs * threads <= limits["regs"],
           f"tile needs about {regs * threads} registers per CTA; {arch} has {limits['regs']}")


WORKLOAD_FIELDS = ("problem", "batch", "in_features", "out_features", "constants")
VARIANT_FIELDS = ("math", "backend", "fusion", "tile", "arch")


@dataclasses.dataclass(frozen=True)
class Workload:
    """The problem a file solves: the reference (a shipped problem's name or a reference file's
    path) at a shape, with the module-level constants set by name (`--set NAME=VALUE`, sorted
    (name, value) pairs; batch / in / out are the fields). Its identity is the reference's
    content (`sha256`) and the shape, never the path: what kgen remembers is keyed by that."""

    problem: str
    batch: int
    in_features: int
    out_features: int
    constants: tuple = ()

    def __post_init__(self):
        from kgen.frontend.problems import PROBLEMS, is_path

        _check(isinstance(self.problem, str) and (self.problem in PROBLEMS or is_path(self.problem)),
               f"unknown problem {self.problem!r}; shipped: {', '.join(PROBLEMS)} (or a reference file's path)")
        for field in ("batch", "in_features", "out_features"):
            value = getattr(self, field)
            _check(isinstance(value, int) and value >= 1, f"{field} must be a positive integer, got {value!r}")
        check_shape(self.batch, self.in_features, self.out_features)
        _check(isinstance(self.constants, tuple) and all(
            isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], (int, float))
            and not isinstance(c[1], bool) for c in self.constants) and list(self.constants) == sorted(self.constants),
            f"constants must be sorted (name, number) pairs, got {self.constants!r}")

    @property
    def problem_name(self) -> str:
        from kgen.frontend.problems import problem_name

        return problem_name(self.problem)

    def shape_name(self) -> str:
        name = f"{self.problem_name}_b{self.batch}_i{self.in_features}_o{self.out_features}"
        for constant, value in self.constants:
            name += f"_{constant}{value:g}"
        return name

    def reference(self):
        from kgen.frontend.problems import load

        return load(self.problem, self.batch, self.in_features, self.out_features, self.constants)

    def graph(self):
        from kgen.frontend.problems import graph

        return graph(self.problem, self.batch, self.in_features, self.out_features, self.constants)

    @property
    def sha256(self) -> str:
        """The reference's content hash (its text), wherever the file lies."""
        return self.reference().sha256

    def identity(self) -> str:
        """The workload as caches key it: the reference's content and the shape, not its path
        (two files of one stem never share an entry; an edited reference never reuses one)."""
        return (f"{self.sha256[:16]}|{self.batch}x{self.in_features}x{self.out_features}"
                + "".join(f"|{name}={value!r}" for name, value in self.constants))

    def to_dict(self) -> dict:
        """Plain data, as JSON keeps it (the constants as [name, value] lists)."""
        return {"problem": self.problem, "batch": self.batch, "in_features": self.in_features,
                "out_features": self.out_features, "constants": [list(c) for c in self.constants]}

    @classmethod
    def from_dict(cls, d: dict) -> "Workload":
        return cls(**{k: d[k] for k in WORKLOAD_FIELDS if k in d and k != "constants"},
                   constants=tuple(tuple(c) for c in d.get("constants", ())))


@dataclasses.dataclass(frozen=True)
class Variant:
    """The code variant: the GEMM (backend, math mode, tile), the fusion level and the target.
    Validated on its own (admissible combinations, tile divisibility, shared-memory and
    register budgets of the target): whether a variant can be built does not depend on the
    workload."""

    math: str = "fp32_simt"
    backend: str = "kgen"
    fusion: int = 2
    tile: Tile | None = None
    arch: str = WGMMA_ARCH

    def __post_init__(self):
        _check(self.math in MATH_MODES, f"unknown math mode {self.math!r}; known: {', '.join(MATH_MODES)}")
        _check(self.backend in BACKENDS, f"unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")
        _check(self.fusion in FUSION_LEVELS, f"fusion must be one of {sorted(FUSION_LEVELS)}, got {self.fusion!r}")
        _check(self.arch in ARCH_LIMITS, f"unknown arch {self.arch!r}; known: {', '.join(ARCH_LIMITS)}")
        if self.backend == "wgmma":
            _check(self.math in WGMMA_MATHS,
                   f"the wgmma GEMM implements {', '.join(WGMMA_MATHS)}, not {self.math}")
        else:
            _check(self.math not in WGMMA_ONLY_MATHS, f"{self.math} runs on kgen's Hopper GEMM only (--backend wgmma)")
        if self.backend == "gemv":
            _check(self.math == "fp32_simt", "the matrix-vector rewrite computes in fp32 (--math fp32_simt)")
            _check(self.fusion == 1 and self.tile is None, "the matrix-vector rewrite has no GEMM: "
                   "only fusion level 1 and no tile")
        elif self.backend == "cublas":
            _check(self.math in CUBLAS_COMPUTE_TYPES,
                   f"cuBLAS has no {self.math} compute type on this path; use one of {', '.join(CUBLAS_COMPUTE_TYPES)}")
            _check(self.fusion == 1, "cuBLAS computes the GEMM alone, so only fusion level 1 applies")
            _check(self.tile is None, "cuBLAS chooses its own tiles; give no tile")
        else:
            _check(self.tile is not None, "a kgen GEMM needs a tile")
            _validate_tile(self.family, self.math, self.tile, self.arch)

    @property
    def family(self) -> str:
        return gemm_family(self.backend, self.math)

    @property
    def eager_gemm(self) -> bool:
        """The GEMM is a plain cuBLAS fp32 call, as eager's matmul is: with row sums in eager's
        order (kernels/eager_sum.cuh) the variant can give eager's own rounding."""
        return self.family == "cublas" and self.math == "fp32_simt"

    def name(self) -> str:
        """The variant in a file name (without the target, which the key holds)."""
        if self.backend == "cublas":
            return f"cublas-{self.math}_f{self.fusion}"
        if self.backend == "gemv":
            return f"gemv-{self.math}"
        prefix = f"wgmma-{self.math}" if self.backend == "wgmma" else self.math
        return f"{prefix}_f{self.fusion}_{self.tile.name()}"

    def to_dict(self) -> dict:
        return {"math": self.math, "backend": self.backend, "fusion": self.fusion,
                "tile": None if self.tile is None else dataclasses.asdict(self.tile), "arch": self.arch}

    @classmethod
    def from_dict(cls, d: dict) -> "Variant":
        tile = d.get("tile")
        return cls(**{**{k: d[k] for k in VARIANT_FIELDS if k in d},
                      "tile": None if tile is None else Tile(**tile)})


def _forward(part: str, field: str) -> property:
    return property(lambda self: getattr(getattr(self, part), field), doc=f"spec.{part}.{field}")


# The flat record of a spec (KGEN_SPEC, results/*.json, generated/index.json), in this order.
SPEC_FIELDS = ("problem", "batch", "in_features", "out_features", "math", "backend", "fusion", "tile",
               "arch", "constants")


@dataclasses.dataclass(frozen=True)
class Spec:
    """A workload and the code variant that solves it: everything that decides the text of an
    emitted file. The flat names (spec.batch, spec.math, spec.tile, ...) read the two halves."""

    workload: Workload
    variant: Variant

    def __post_init__(self):
        if not isinstance(self.workload, Workload) or not isinstance(self.variant, Variant):
            raise TypeError("Spec(workload, variant) takes a Workload and a Variant; "
                            "Spec.of(problem, batch, in_features, out_features, ...) takes the flat fields")

    @classmethod
    def of(cls, problem: str, batch: int, in_features: int, out_features: int, math: str = "fp32_simt",
           backend: str = "kgen", fusion: int = 2, tile: Tile | None = None, arch: str = WGMMA_ARCH,
           constants: tuple = ()) -> "Spec":
        """The spec of the flat fields (the workload is validated first, then the variant)."""
        return cls(Workload(problem, batch, in_features, out_features, constants),
                   Variant(math, backend, fusion, tile, arch))

    problem = _forward("workload", "problem")
    batch = _forward("workload", "batch")
    in_features = _forward("workload", "in_features")
    out_features = _forward("workload", "out_features")
    constants = _forward("workload", "constants")
    problem_name = _forward("workload", "problem_name")
    math = _forward("variant", "math")
    backend = _forward("variant", "backend")
    fusion = _forward("variant", "fusion")
    tile = _forward("variant", "tile")
    arch = _forward("variant", "arch")
    family = _forward("variant", "family")
    eager_gemm = _forward("variant", "eager_gemm")

    def replace(self, **changes) -> "Spec":
        """This spec with flat fields changed (each goes to its half)."""
        unknown = set(changes) - set(SPEC_FIELDS)
        if unknown:
            raise TypeError(f"Spec has no field {', '.join(sorted(unknown))}")
        work = {k: v for k, v in changes.items() if k in WORKLOAD_FIELDS}
        var = {k: v for k, v in changes.items() if k not in WORKLOAD_FIELDS}
        return Spec(dataclasses.replace(self.workload, **work) if work else self.workload,
                    dataclasses.replace(self.variant, **var) if var else self.variant)

    def config_name(self) -> str:
        """The variant without its shape: what the kernel code depends on (with the arch)."""
        return f"{self.problem_name}_{self.variant.name()}"

    def shape_name(self) -> str:
        return self.workload.shape_name()

    def name(self) -> str:
        return f"{self.shape_name()}_{self.variant.name()}"

    def reference(self):
        return self.workload.reference()

    def graph(self):
        return self.workload.graph()

    def to_dict(self) -> dict:
        """Plain data, as JSON keeps it: the flat fields of both halves (the constants as
        [name, value] lists)."""
        d = {**self.workload.to_dict(), **self.variant.to_dict()}
        return {k: d[k] for k in SPEC_FIELDS}

    @classmethod
    def from_dict(cls, d: dict) -> "Spec":
        unknown = set(d) - set(SPEC_FIELDS)
        if unknown:
            raise TypeError(f"unexpected spec field(s) {', '.join(sorted(unknown))}")
        return cls(Workload.from_dict(d), Variant.from_dict(d))

    def key(self) -> str:
        """Hash of the exact kernel source (and link flags) this spec renders to: it names the
        extension build, so specs that differ only in shape (problems 33 and 39's tf32x3 files)
        share one build, and a change of kgen's kernels or templates is a new key."""
        from kgen.codegen.generator import code_key

        return code_key(self)

    def extension_name(self) -> str:
        return f"kgen_{self.key()}"


# cuBLAS compute types per math mode (cublasComputeType_t names), chosen explicitly per call.
CUBLAS_COMPUTE_TYPES = {
    "fp32_simt": "CUBLAS_COMPUTE_32F",
    "tf32": "CUBLAS_COMPUTE_32F_FAST_TF32",
    "bf16": "CUBLAS_COMPUTE_32F_FAST_16BF",
}


@functools.lru_cache(maxsize=1)
def kgen_source_digest() -> str:
    """Hash of kgen's own code (Python, templates, kernels): stated in every emitted header, so
    that a file says exactly which kgen made it, even between version numbers."""
    h = hashlib.sha256()
    for path in sorted(KGEN_DIR.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".j2", ".cuh", ".h", ".cpp", ".cu"):
            h.update(str(path.relative_to(KGEN_DIR)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]
