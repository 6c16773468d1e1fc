"""The tables kgen chooses from, in one place: the default target, the fastest fp32-accurate
GEMM family per target, the tiles `kgen search` tries per family (its search space) and the
tiles `kgen generate`'s shape rule prefers (choose.shape_rule; a test keeps every rule tile inside
the search space). Per-target hardware limits are spec.ARCH_LIMITS'."""

from __future__ import annotations

import dataclasses

from kgen.tune.spec import (FP16X3_K_MULTIPLE, FP16X3_W_IN_REGISTERS_MAX_ROWS, FP32_ACCURATE_MATHS, MATH_MODES,
                            ROUND16_K_MULTIPLE, ROUND16_MATHS, WGMMA_ARCH, Tile)

# The target when there is no GPU to ask and no --arch: Hopper, where kgen is fastest.
DEFAULT_ARCH = WGMMA_ARCH
# SMs of each target's usual large part (H100 SXM, A100, RTX 3090, Jetson Orin, RTX 4090, B200,
# RTX 5090): what the tile rule fills when the GPU itself is not here to ask.
TYPICAL_SMS = {"sm_80": 108, "sm_86": 82, "sm_87": 16, "sm_89": 128, WGMMA_ARCH: 132,
               "sm_100": 148, "sm_120": 170}
# Fastest fp32-accurate family per target (docs/perf.md): the warp-specialized wgmma GEMM in
# 3xTF32 on Hopper (0.40-0.46x eager fp32), the mma.sync 3xTF32 GEMM elsewhere (0.68x on H100).
# Tile candidates in order of preference; the rule takes the first that the target admits and
# that gives the shape enough tiles to fill the GPU.
RULE_SIMT_TILES = (Tile(128, 128, 8, 64, 64, tm=8, tn=16), Tile(64, 64, 8, 32, 32, tm=4, tn=8))
RULE_WGMMA_TF32X3_TILES = (Tile(128, 128, 32, 16, 128, stages=4), Tile(64, 128, 32, 16, 128, stages=4),
                      Tile(64, 64, 32, 16, 64, stages=6))
RULE_MMA_TF32X3_TILES = (Tile(128, 128, 64, 64, 32, stages=3), Tile(128, 128, 32, 64, 32, stages=3),
                    Tile(128, 128, 32, 64, 32, stages=2), Tile(128, 64, 32, 64, 32, stages=3),
                    Tile(64, 64, 32, 32, 32, stages=3))
# fp16x3 stages four fp16 tiles of 128-byte rows (hi and lo of x and w): 3 stages at 128x128.
RULE_WGMMA_FP16X3_TILES = (Tile(128, 128, 32, 16, 128, stages=3), Tile(64, 128, 32, 16, 128, stages=4),
                           Tile(64, 64, 32, 16, 64, stages=6))
# fp16x3 where every GEMM's output is at most FP16X3_NARROW_OUTPUT_MAX_N wide: tiles of that BN,
# no wider than the output needs, so that the GEMM splits x in its registers
# (WgmmaWsF16x3Gemm::x_in_registers: N <= BN) with the fewest wasted products. 128 rows where
# they fill the GPU (two consumer warpgroups a CTA: at 4096 x 4096 -> 10, 33.8 us against 64x64's
# 38.8, the same 128 units), else 64 (8192 x 1024 -> 16: 64x64's 128 units 18.8 us, 128x64's 64
# units 23.8; docs/perf.md, session 53, call B).
RULE_WGMMA_FP16X3_NARROW_TILES = (Tile(128, 64, 32, 16, 64, stages=4), Tile(64, 64, 32, 16, 64, stages=6))
FP16X3_NARROW_OUTPUT_MAX_N = 64
# x_in_registers also asks the launch for at least 1 / FP16X3_X_IN_REGISTERS_SM_SHARE of the SMs'
# count in work units (WgmmaWsF16x3Gemm::kXInRegistersSmShare; tests/test_configs.py ties them).
FP16X3_X_IN_REGISTERS_SM_SHARE = 4
# bf16 / fp16 on wgmma (fp32 operands): one tile, 128 x 128, two a CTA (one at batches of at most
# 128 rows; kernels/gemm_wgmma_round16.cuh), 3 stages of 64 KB.
RULE_WGMMA_ROUND16_TILES = (Tile(128, 128, 32, 16, 128, stages=3),)
RULE_TILES = {"wgmma": RULE_WGMMA_TF32X3_TILES, "mma": RULE_MMA_TF32X3_TILES, "simt": RULE_SIMT_TILES}
# A math mode whose tiles differ from its family's (family, math) -> tiles.
RULE_TILES_BY_MATH = {("wgmma", "fp16x3"): RULE_WGMMA_FP16X3_TILES,
                      **{("wgmma", math): RULE_WGMMA_ROUND16_TILES for math in ROUND16_MATHS}}


def rule_tiles(family: str, math: str, widest_n: int | None = None) -> tuple:
    """The shape rule's tiles for a GEMM family and math mode, in order of preference, where the
    module's widest GEMM output is `widest_n` wide (None: any width)."""
    if (family, math) == ("wgmma", "fp16x3") and widest_n is not None and widest_n <= FP16X3_NARROW_OUTPUT_MAX_N:
        return RULE_WGMMA_FP16X3_NARROW_TILES
    return RULE_TILES_BY_MATH.get((family, math), RULE_TILES[family])
# Fusion: the fused statistics epilogue lengthens every GEMM tile, a separate statistics kernel
# costs a read of z. Measured (docs/perf.md): fusion 1 wins at batch 1024, fusion 2 at 16384.
FUSED_STATS_MIN_BATCH = 4096
# A bf16 / fp16 module's GEMM is several times faster, and the statistics kernel's read of S (in
# fp32) a larger share: fusion 2 wins at batch 1024 (docs/perf.md, session 12: KernelBench 33, 84,
# 97 in bf16, 0.256 / 0.261 / 0.252 ms against 0.269 / 0.272 / 0.265).
FUSED_STATS_MIN_BATCH_16BIT = 1024


def fused_stats_min_batch(dtype: str) -> int:
    """The batch from which the rule fuses the statistics into the GEMM, for a module in `dtype`."""
    return FUSED_STATS_MIN_BATCH if dtype == "fp32" else FUSED_STATS_MIN_BATCH_16BIT


# Split-K in the Hopper GEMMs (kernels/gemm_wgmma_ws.cuh's SplitK, which the fp16x3 GEMM shares):
# where a batch's output has fewer tiles than the GPU has SMs, each tile's k-range is split over
# up to SPLIT_K_MAX_SPLITS CTAs, each summing at least SPLIT_K_MIN_K_TILES k-tiles; a batch of at
# most SKINNY_MAX_ROWS rows runs the few-row GEMM (SkinnyGemm) instead, and tf32 / tf32x3 tiles
# wider than SPLIT_K_MAX_BN run unsplit (a K that TMA cannot read, not a multiple of 4, ModelNew
# pads with zeros to a multiple of 8).
# fp16x3's k-tile is FP16X3_BK wide whatever the variant's tile says. tests/test_configs.py ties
# these to the CUDA.
SPLIT_K_MIN_K_TILES = 16
SPLIT_K_MAX_SPLITS = 8
SPLIT_K_MAX_BN = 128
SKINNY_MAX_ROWS = 16
# The round16 GEMM's tile in the build for torch.autocast of an fp32 module (its weight left fp32,
# rounded in the GEMM's registers: generator.autocast_gemm_type), whatever the fp32 build's tile.
AUTOCAST_ROUND16_TILE = RULE_WGMMA_ROUND16_TILES[0]
# The most rows at which that build's GEMM reads the fp32 weight (more: the weight is converted and
# the half GEMM runs). The round16 GEMM saves the pass that converts w (6 bytes an element of w)
# and runs at some 80 % of the half GEMM's rate (shared memory's bandwidth, 1.25x the 16-bit
# rate's need), and its pass over x (4 bytes an element of x) comes on top. The GEMM's kernels'
# GPU time a call, x's conversions included, on an H200 (docs/perf.md, session 46, call E): 1024 x
# 8192 -> 8192 233 us against the conversions' and the half GEMM's 277; 16384 x 4096 -> 4096 1136
# against 893. A model of both puts the crossover near 2000 rows for N 4096-8192, but KernelBench
# 51 and 53 (2048 x 8192 -> 8192) ran at 1.02-1.03x eager autocast so, 0.86-0.95x converted
# (calls F and G).
AUTOCAST_FP32_WEIGHT_MAX_ROWS = 1024
# And the fewest: at most SKINNY_MAX_ROWS rows the fp32 module's round16 GEMM hands the product to
# the few-row GEMM of fp32 products, which does not read 16-bit x; there the weight is converted and
# the half GEMM's few-row path runs, as for a 16-bit module (the round16 CTAs at so few rows have
# not run on a GPU).
AUTOCAST_FP32_WEIGHT_MIN_ROWS = SKINNY_MAX_ROWS + 1
FP16X3_BK = 64
# The shape rule takes a tile that gives (nearly) every SM a unit of work, a tile or a tile's
# k-split: KernelBench 68 (128 x 16384 -> 16384) on the H100's 132 SMs ran 0.574 ms in 128 tiles
# of 128x128 and 0.776 ms in 256 tiles of 64x128 (docs/perf.md): a wave 3 % short costs less
# than halving BM.
FILL_FRACTION = 0.9


def output_tiles(tile: Tile, batch: int, out_features: int) -> int:
    """The output tiles of a GEMM of `batch` rows and `out_features` columns."""
    return -(-batch // tile.bm) * -(-out_features // tile.bn)


# The wgmma bf16 / fp16 GEMM's CTA computes this many of its tiles, stacked in rows (WgmmaWsRound16Gemm:
# kRows = 2 BM rows of x a CTA; one where the batch has at most BM rows, its Narrow CTA, which
# leaves the count of CTAs as it is). tests/test_configs.py ties it to the CUDA.
ROUND16_TILES_PER_CTA = 2


def gemm_math(family: str, math: str, in_features: int) -> str:
    """The math of the GEMM a variant runs at this K (generator.gemm_type): fp16x3's and wgmma
    bf16's / fp16's where K is a multiple of their FP16X3_K_MULTIPLE / ROUND16_K_MULTIPLE, else
    tf32x3's and tf32's."""
    if family == "wgmma" and math == "fp16x3" and in_features % FP16X3_K_MULTIPLE:
        return "tf32x3"
    if family == "wgmma" and math in ROUND16_MATHS and in_features % ROUND16_K_MULTIPLE:
        return "tf32"
    return math


def launch_tiles(family: str, math: str, tile: Tile, batch: int, out_features: int,
                 in_features: int | None = None) -> int:
    """The CTAs of an unsplit launch: one per output tile, or per ROUND16_TILES_PER_CTA tiles
    stacked in rows (the wgmma bf16 / fp16 GEMM, where it runs at in_features: gemm_math). (At
    batches of at most BM rows that GEMM's CTAs take one tile each: as many CTAs, one row of them.)"""
    if in_features is not None:
        math = gemm_math(family, math, in_features)
    if family == "wgmma" and math in ROUND16_MATHS:
        tile = dataclasses.replace(tile, bm=tile.bm * ROUND16_TILES_PER_CTA)
    return output_tiles(tile, batch, out_features)


def fp16x3_x_in_registers(tile: Tile, batch: int, in_features: int, out_features: int, sms: int) -> bool:
    """Whether fp16x3's GEMM splits x in its registers at this shape (WgmmaWsF16x3Gemm::
    x_in_registers): an output no wider than the tile, more rows than w in registers and the
    few-row GEMM take, and enough work units."""
    w_in_registers = tile.bm == tile.bn and batch <= FP16X3_W_IN_REGISTERS_MAX_ROWS
    if out_features > tile.bn or w_in_registers or batch <= SKINNY_MAX_ROWS:
        return False
    units = output_tiles(tile, batch, out_features) * k_splits("wgmma", "fp16x3", tile, batch, in_features,
                                                               out_features, sms)
    return FP16X3_X_IN_REGISTERS_SM_SHARE * units >= sms


def gemm_k(in_features: int, element_bytes: int) -> int:
    """The K a Hopper (wgmma) GEMM runs at for a module's in_features, operands of element_bytes:
    its C entry pads a K off TMA's 16-byte rows, or 0, with zeros to a multiple of 8
    (kernels/entry.cuh, gemm_k; tests/test_pad_k.py compiles that one and compares)."""
    if in_features % (16 // element_bytes) or in_features == 0:
        return in_features + 8 - in_features % 8
    return in_features


def k_splits(family: str, math: str, tile: Tile | None, batch: int, in_features: int, out_features: int,
             sms: int) -> int:
    """The CTAs each output tile's k-range is split over at this shape on a GPU of `sms` SMs, as
    the GEMM decides at run time (SplitK::splits_for; 1: unsplit)."""
    if family != "wgmma" or tile is None or batch <= SKINNY_MAX_ROWS or in_features <= 0:
        return 1
    math = gemm_math(family, math, in_features)
    if math == "fp16x3":
        bk = FP16X3_BK
    elif math in ("tf32x3", "tf32"):
        if tile.bn > SPLIT_K_MAX_BN:
            return 1
        bk = tile.bk
        in_features = gemm_k(in_features, 4)
    else:
        return 1
    tiles = output_tiles(tile, batch, out_features)
    k_tiles = -(-in_features // bk)
    return max(1, min(sms // tiles, k_tiles // SPLIT_K_MIN_K_TILES, SPLIT_K_MAX_SPLITS))


def work_units(family: str, math: str, tile: Tile, batch: int, in_features: int, out_features: int,
               sms: int) -> int:
    """The CTAs of the GEMM's launch at this shape: its output tiles (launch_tiles) times their k-splits."""
    return launch_tiles(family, math, tile, batch, out_features, in_features) * k_splits(family, math, tile, batch, in_features, out_features, sms)


# fp16x3 on Hopper where its split pass pays: the pass moves 8 bytes per element of x (read, two
# halves written) and, w's split kept from call to call (session 50), reads w's 4 while w is
# unchanged: (8 M + 4 N) K bytes, the GEMM saving time in proportion to M N K, so fp16x3 wins
# where M N / (M + N / 2) is large. (Before the kept split the pass moved 8 (M + N) K bytes and
# the rule asked M N / (M + N) >= 512, measured at session 21: 0.72x tf32x3's time at 1024 x 8192
# -> 8192, 0.63x at 16384 x 4096 -> 4096.) Measured with the kept split (docs/perf.md, session 51,
# H200, a forward's kernels in device us, fp16x3 / tf32x3, each file the rule's tile for its math;
# M N / (M + N / 2) in brackets): 768 x 8192 -> 1024 (614) 128 / 272; 320 x 8192 -> 8192 (540)
# 355 / 506; 512 x 4096 -> 1024 (512) 50.0 / 51.4; 256 x 8192 -> 8192 (482) 230 / 271 with the
# pass (218 with w in registers); 1024 x 8192 -> 512 (410) 80.5 / 96.5; 384 x 8192 -> 768 (384)
# 70.1 / 70.6; 300 x 8192 -> 512 (276) 48.0 / 52.5; 4096 x 1024 -> 256 (248) 31.5 / 40.0; 2048 x
# 8192 -> 256 (241) 96.6 / 115.4. fp16x3 won or tied at every shape measured; the threshold sits
# below the smallest of them. (The bytes assume a kept,
# unchanged w: a weight the forward computes, or one a training step changes before every call,
# is split afresh, 8 (M + N) K bytes, which the rule does not weigh and the search's cost model
# does.) At batches up to
# spec.FP16X3_W_IN_REGISTERS_MAX_ROWS the rule's square tile splits w in the GEMM's registers
# instead, with no pass over w: fp16x3 there too, where that tile's work units (its tiles, split
# in K where they are few) fill the GPU. Measured on an H100: 128 x 32768 -> 32768, 256 tiles,
# 1.99-2.04 ms against tf32x3's 2.50-2.55 (session 22); 128 x 8192 -> 8192, 64 tiles split in two,
# 0.141-0.156 ms against tf32x3's 0.165-0.185 (session 27).
FP16X3_MIN_HARMONIC = 224
# Below that harmonic, at more rows than w in registers takes, fp16x3 still where K is long enough
# for its faster products to pay for x's pass (8 bytes per element of x, and a GEMM whose tiles
# run few k-tiles gains little from them) and the output at least FP16X3_NARROW_MIN_N wide.
# Measured (docs/perf.md, session 52, calls F-H, H200, device us, fp16x3 / tf32x3, x's pass a
# warp a row at K <= 1024; M N / (M + N / 2) in brackets): 512 x 4096 -> 256 (205) 22.1 / 29.9;
# 2048 x 1024 -> 128 (124) 15.2 / 20.3; 4096 x 4096 -> 64 (63) 73.2 / 85.6; 1024 x 1024 -> 32
# (32) 16.5 / 23.2; 8192 x 1024 -> 16 (16) 37.5 / 48.7. At K = 256 fp16x3 was behind or even
# (16384 x 256 -> 32: 22.7 / 19.7; 512 x 256 -> 128: 8.1 / 8.2); K = 512 and outputs narrower
# than 16 were not measured: tf32x3 there.
FP16X3_NARROW_MIN_K = 1024
FP16X3_NARROW_MIN_N = 16
# And at every K where the output is at most FP16X3_NARROW_OUTPUT_MAX_N wide, at more rows than w
# in registers takes: the GEMM splits x in its registers there, with no pass over x (session 53,
# call B, H200, a forward's kernels in device us: fp16x3 at the narrow tiles / tf32x3 (call A) /
# eager fp32): 16384 x 256 -> 32 11.3 / 19.6 / 15.0; 8192 x 1024 -> 16 18.8 / 48.7 / 27.5;
# 8192 x 1024 -> 64 19.0 / - / 42.7; 4096 x 4096 -> 10 33.8 / - / 104.2; at 1024 x 1024 -> 32, too
# few tiles for x in registers, the pass: 15.5 (128x64) / 23.6 / 16.2.


def fastest_family(arch: str, batch: int | None = None, in_features: int | None = None,
                   out_features: int | None = None, sms: int | None = None) -> tuple[str, str]:
    """(backend, math) of the fastest fp32-accurate GEMM on the target at this shape (without a
    shape: the one for every shape), on a GPU of `sms` SMs [the target's typical count]."""
    if arch != WGMMA_ARCH:
        return "kgen", "tf32x3"
    if batch and in_features and out_features and in_features % FP16X3_K_MULTIPLE == 0:
        if 2 * batch * out_features >= FP16X3_MIN_HARMONIC * (2 * batch + out_features):
            return "wgmma", "fp16x3"
        square = RULE_WGMMA_FP16X3_TILES[0]
        sms = sms or TYPICAL_SMS[arch]
        units = work_units("wgmma", "fp16x3", square, batch, in_features, out_features, sms)
        if batch <= FP16X3_W_IN_REGISTERS_MAX_ROWS and units >= FILL_FRACTION * sms:
            return "wgmma", "fp16x3"
        if (batch > FP16X3_W_IN_REGISTERS_MAX_ROWS and in_features >= FP16X3_NARROW_MIN_K
                and out_features >= FP16X3_NARROW_MIN_N):
            return "wgmma", "fp16x3"
        if batch > FP16X3_W_IN_REGISTERS_MAX_ROWS and out_features <= FP16X3_NARROW_OUTPUT_MAX_N:
            return "wgmma", "fp16x3"
    return "wgmma", "tf32x3"


# ---- the search space ----------------------------------------------------------------------
# Tiles tried per GEMM family. SIMT: (BM, BN, BK, WM, WN, TM, TN). mma.sync: (BM, BN, BK, WM, WN, stages).
SIMT_TILES = [
    (128, 128, 8, 64, 64, 8, 16),
    (128, 128, 16, 32, 64, 8, 8),
    (256, 128, 8, 64, 64, 8, 16),
    (128, 128, 8, 32, 64, 8, 8),
    (128, 128, 8, 64, 32, 8, 8),
    (64, 64, 8, 32, 32, 4, 8),
]
# tf32x3 keeps partial accumulators beside the main ones, so its warp tiles stay at 64x32.
# Each list is ordered fastest-measured first (docs/perf.md), so `--top N` keeps the best N.
TF32X3_TILES = [
    (128, 128, 64, 64, 32, 3),  # BK=64: half the partial-accumulator flushes of BK=32
    (128, 128, 32, 32, 64, 3),
    (128, 128, 64, 64, 32, 2),
    (128, 128, 32, 64, 32, 3),
    (128, 128, 32, 64, 32, 4),
    (256, 64, 32, 64, 32, 3),
    (128, 64, 32, 64, 32, 4),
    # Tiles that fit the 99 KB of shared memory of sm_86 / sm_89 / sm_120.
    (128, 128, 32, 64, 32, 2),
    (128, 64, 32, 64, 32, 3),
    (64, 64, 32, 32, 32, 3),   # the shape rule's tile for shapes too small to fill the GPU
]
# TF32 and BF16 (loose tolerances only): the large warp tiles measured fastest.
FAST_MMA_TILES = [
    (128, 256, 32, 64, 64, 3),
    (128, 128, 32, 64, 64, 3),
]
# wgmma (WGMMA_ARCH, warp-specialized): (BM, BN, stages); the warp tile is 16 x BN. Fastest-measured
# first (docs/perf.md; the standalone selftest tests/cuda/wgmma_selftest.cu, removed after
# 3e5e87a), and ahead of the mma.sync tiles of the same math mode, which they beat.
WGMMA_TILES = {
    # (the 64-row tiles last: the shape rule's choice where 128-row tiles leave SMs idle)
    "tf32x3": [(128, 128, 4), (128, 128, 3), (128, 64, 6), (64, 128, 4), (64, 64, 6)],
    # fp16x3: four fp16 operand tiles a stage (hi and lo of x and w), 3 stages of 64 KB at 128x128.
    "fp16x3": [(128, 128, 3), (64, 128, 4), (64, 64, 6), (128, 64, 4)],
    "tf32": [(128, 256, 4), (128, 128, 6)],
    # bf16 / fp16 products of fp32 operands (the 1e-2 tier): w in the GEMM's registers, two tiles a CTA.
    "bf16": [(128, 128, 3)],
    "fp16": [(128, 128, 3)],
}

# The dtypes a module may run in, by KernelBench's precision names (--dtype, --precision) -> the
# torch dtype's name; KernelBench's tolerance at each (its eval's get_tolerance_for_precision).
PRECISIONS = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
PRECISION_TOLERANCES = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}


# The tolerance of the relaxed tier: where a file's GEMM rounds an fp32 module's operands (TF32,
# BF16 or FP16 products), 1e-4 is out of its reach and its gate is this one (KernelBench's for
# 16-bit modules).
RELAXED_TOLERANCE = 1e-2


def gate_tolerance(dtype: str, math: str) -> float:
    """The tolerance a file is judged at by default (kgen validate, bench's training check): the
    module's dtype's (PRECISION_TOLERANCES), or the relaxed tier's where the file's math rounds an
    fp32 module's GEMM operands (spec.FP32_ACCURATE_MATHS are the others)."""
    relaxed = math in MATH_MODES and math not in FP32_ACCURATE_MATHS
    return max(PRECISION_TOLERANCES[dtype], RELAXED_TOLERANCE) if relaxed else PRECISION_TOLERANCES[dtype]


def torch_dtype(name: str):
    """The torch dtype of a PRECISIONS name ("bf16" -> torch.bfloat16)."""
    import torch

    return getattr(torch, PRECISIONS[name])


def precision_name(dtype) -> str:
    """PRECISIONS' name of a torch dtype (or of its name, "bfloat16"); fp32 for any other."""
    torch_name = str(dtype).removeprefix("torch.")
    return next((name for name, t in PRECISIONS.items() if t == torch_name), "fp32")

# The tile of the 16-bit wgmma GEMM (a module in bf16 or fp16), whatever the variant's fp32 tile:
# BM x 256 (each consumer warpgroup 64 x 256, 128 fp32 accumulators per thread: 168 registers,
# no spills), 64 of k per stage (128-byte rows), 4 stages (192 KB at BM = 128). A bf16 k-tile
# is a quarter of the tf32x3 one's tensor-core work, so the wide tile keeps the consumers busy
# per byte the producer loads. (Where such tiles would fill at most half the GPU, a few rows of a
# wide output, the kernel runs BM x 128 in six stages instead, chosen per call:
# WgmmaWsHalfGemm::narrow_at in kernels/gemm_wgmma_half.cuh.)
HALF_WGMMA_BN = 256
HALF_WGMMA_STAGES = 4
