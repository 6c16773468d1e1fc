"""The tables of kgen/tune/configs.py hold together: every tile the shape rule may pick is one the
search tries (so a search can confirm or beat what `kgen generate` chose)."""

import re

import pytest

from kgen.tune import configs
from kgen.tune.search import enumerate_specs
from kgen.tune.spec import Tile


RULE_FAMILIES = [(family, "fp32_simt" if family == "simt" else "tf32x3") for family in sorted(configs.RULE_TILES)]


@pytest.mark.parametrize("family, math", RULE_FAMILIES + sorted(configs.RULE_TILES_BY_MATH))
def test_every_rule_tile_is_in_the_search_space(family, math):
    arch = configs.WGMMA_ARCH   # the largest limits: every tile of the lists is valid there
    specs = enumerate_specs("gemm_scale_bn", 1024, 1024, 1024, maths=(math,), arch=arch, include_cublas=False)
    searched = {s.tile for s in specs if s.family == family}
    for tile in configs.rule_tiles(family, math):
        assert tile in searched, f"{family} {math} tile {tile} of the shape rule is not in the search space"


def test_the_default_target_is_the_wgmma_one():
    assert configs.fastest_family(configs.DEFAULT_ARCH) == ("wgmma", "tf32x3")
    assert configs.fastest_family("sm_80") == ("kgen", "tf32x3")


@pytest.mark.parametrize("shape, math", [
    ((1024, 8192, 8192), "fp16x3"),     # KernelBench 33, 12, 84: M N / (M + N / 2) = 1638
    ((16384, 4096, 4096), "fp16x3"),    # 39
    ((128, 32768, 32768), "fp16x3"),    # 55, 56, 59: w split in the GEMM's registers (no pass over its 4 GB)
    ((128, 8192, 8192), "fp16x3"),      # 64 tiles, each split in two in K: w in registers, the GPU filled
    ((256, 8192, 8192), "fp16x3"),      # 128 square tiles: w in registers (M N / (M + N / 2) = 482 too)
    ((300, 8192, 8192), "fp16x3"),      # more rows than w in registers takes: the pass, its w's split kept
    ((1024, 8190, 8192), "tf32x3"),     # K not a multiple of 8: fp16 rows TMA cannot read
    ((128, 1024, 1024), "tf32x3"),      # 8 tiles and too short a K to split: w's registers cannot pay
    ((768, 8192, 1024), "fp16x3"),      # 614: tf32x3 before w's split was kept (M N / (M + N) = 438 < 512)
    ((2048, 8192, 256), "fp16x3"),      # 241, the smallest measured (session 51: 96.6 us against tf32x3's 115.4)
    ((1024, 8192, 256), "fp16x3"),      # 228: just above FP16X3_MIN_HARMONIC
    ((1024, 8192, 248), "fp16x3"),      # 221: just below it, but K long enough (below)
    ((1024, 512, 248), "tf32x3"),       # 221, K = 512
    # Below FP16X3_MIN_HARMONIC at more rows than w's split in registers takes: fp16x3 where K is
    # at least FP16X3_NARROW_MIN_K and N at least FP16X3_NARROW_MIN_N (session 52, calls F-H)
    ((4096, 1024, 128), "fp16x3"),      # 126 (2048 x 1024 -> 128: 15.2 us against 20.3)
    ((8192, 1024, 16), "fp16x3"),       # 16 (37.5 against 48.7)
    ((4096, 4096, 64), "fp16x3"),       # 63 (73.2 against 85.6)
    ((512, 256, 128), "tf32x3"),        # K = 256: even (8.1 against 8.2)
    ((4096, 512, 128), "tf32x3"),       # K = 512: not measured
    ((128, 1024, 1024), "tf32x3"),      # at most 256 rows: the fill rule (17.7 against 17.2)
    # At most FP16X3_NARROW_OUTPUT_MAX_N wide, at every K, at more than 256 rows: x split in the
    # GEMM's registers (session 53, call B; fp16x3 at the narrow tiles against tf32x3)
    ((16384, 256, 32), "fp16x3"),       # 11.3 against 19.6 (the pass's 22.7)
    ((4096, 4096, 10), "fp16x3"),       # 33.8 (tf32x3 not measured; eager 104.2)
    ((8192, 1024, 8), "fp16x3"),        # N = 8: as N = 16 (18.8 against 48.7)
    ((8192, 512, 64), "fp16x3"),        # K = 512 (8192 x 1024 -> 64: 19.0 us, eager 42.7)
    ((8192, 512, 65), "tf32x3"),        # wider than the narrow tiles, K = 512: not measured
    ((256, 1024, 32), "tf32x3"),        # at most 256 rows: the fill rule
])
def test_the_rule_takes_fp16x3_where_its_split_pays(shape, math):
    assert configs.fastest_family(configs.WGMMA_ARCH, *shape) == ("wgmma", math)
    assert configs.fastest_family("sm_80", *shape) == ("kgen", "tf32x3")


def test_narrow_outputs_take_the_narrow_tiles_and_split_x_in_registers():
    """fp16x3's rule tiles where the module's widest GEMM output is at most
    FP16X3_NARROW_OUTPUT_MAX_N: BN of that width, 128 rows where they fill the GPU, else 64; and
    the GEMM splits x in its registers there where the units fill a quarter of the SMs."""
    from kgen.tune.choose import Target, shape_rule

    assert all(t.bn == configs.FP16X3_NARROW_OUTPUT_MAX_N for t in configs.RULE_WGMMA_FP16X3_NARROW_TILES)
    assert configs.rule_tiles("wgmma", "fp16x3", 64) == configs.RULE_WGMMA_FP16X3_NARROW_TILES
    assert configs.rule_tiles("wgmma", "fp16x3", 65) == configs.RULE_WGMMA_FP16X3_TILES
    assert configs.rule_tiles("wgmma", "tf32x3", 16) == configs.RULE_WGMMA_TF32X3_TILES
    h100 = Target("sm_90a", 132, "an H100")

    def tile(batch, k, n, problem="gemm_scale_bn"):
        spec, _ = shape_rule(problem, batch, k, n, h100, "wgmma", "fp16x3")
        return spec.tile.bm, spec.tile.bn

    assert tile(4096, 4096, 10) == (128, 64)     # 32 tiles split 4 ways: 128 units
    assert tile(8192, 1024, 16) == (64, 64)      # 128x64: 64 units; 64x64: 128
    assert tile(8192, 1024, 200) == (128, 128)   # wider: the usual tiles
    narrow = configs.RULE_WGMMA_FP16X3_NARROW_TILES
    assert configs.fp16x3_x_in_registers(narrow[0], 4096, 4096, 10, 132)
    assert configs.fp16x3_x_in_registers(narrow[1], 8192, 1024, 16, 132)
    assert not configs.fp16x3_x_in_registers(narrow[1], 1024, 1024, 32, 132)   # 16 units
    assert configs.fp16x3_x_in_registers(narrow[1], 2112, 1024, 32, 132)       # 33 units
    assert not configs.fp16x3_x_in_registers(narrow[1], 200, 8192, 16, 132)     # w in registers
    assert not configs.fp16x3_x_in_registers(narrow[0], 8192, 1024, 65, 132)    # wider than BN


def test_x_in_registers_is_the_kernels_rule():
    """configs.fp16x3_x_in_registers mirrors WgmmaWsF16x3Gemm::x_in_registers (the cost model's
    bytes): its conditions and its share of the SMs, read from the CUDA."""
    from kgen.codegen.generator import CODEGEN_DIR

    source = (CODEGEN_DIR / "kernels" / "gemm_wgmma_f16x3.cuh").read_text()
    share = re.findall(r"static constexpr int kXInRegistersSmShare = (\d+);", source)
    assert share == [str(configs.FP16X3_X_IN_REGISTERS_SM_SHARE)]
    rule = source[source.index("static bool x_in_registers(int M, int N, int K) {"):][:500]
    for line in ("N > BN || w_in_registers(M) || M <= SkinnyGemm<float>::kMaxRows) return false;",
                 "kXInRegistersSmShare) * tiles * splits_for(M, N, K) >= ws_detail::sm_count();"):
        assert line in rule, line


def test_split_k_splits_where_the_tiles_are_too_few_to_fill_the_gpu():
    """configs.k_splits as the GEMMs decide at run time (SplitK::splits_for): SMs // tiles, at
    least SPLIT_K_MIN_K_TILES k-tiles a split, at most SPLIT_K_MAX_SPLITS; not at a few rows (the
    few-row GEMM), not for tf32 tiles wider than 128 or a K TMA cannot read, not off Hopper."""
    square = configs.RULE_WGMMA_FP16X3_TILES[0]
    wide = Tile(128, 256, 32, 16, 256, stages=4)
    sms = configs.TYPICAL_SMS[configs.WGMMA_ARCH]
    k = configs.k_splits
    assert k("wgmma", "fp16x3", square, 128, 8192, 8192, sms) == 2      # 64 tiles
    assert k("wgmma", "tf32x3", square, 128, 8192, 8192, sms) == 2
    assert k("wgmma", "fp16x3", square, 128, 8192, 1024, sms) == 8      # 8 tiles: 16, capped at 8
    assert k("wgmma", "fp16x3", square, 128, 2048, 1024, sms) == 2      # 32 k-tiles of 64: two splits of 16
    assert k("wgmma", "tf32x3", square, 128, 2048, 1024, sms) == 4      # 64 k-tiles of 32
    assert k("wgmma", "fp16x3", square, 1024, 8192, 8192, sms) == 1     # 512 tiles
    assert k("wgmma", "fp16x3", square, 16, 8192, 8192, sms) == 1       # the few-row GEMM
    assert k("wgmma", "fp16x3", square, 17, 8192, 8192, sms) == 2
    assert k("wgmma", "tf32", wide, 128, 8192, 8192, sms) == 1          # 256 wide: unsplit
    assert k("wgmma", "tf32x3", square, 128, 8190, 8192, sms) == 2      # K % 4 != 0: padded to 8192
    assert k("wgmma", "fp16x3", square, 128, 8196, 8192, sms) == 2      # K % 8 != 0: tf32x3's GEMM
    assert k("wgmma", "fp16x3", square, 128, 1028, 1024, sms) == 2      # ... whose k-tiles are 32 wide (64: 1)
    assert k("wgmma", "fp16x3", square, 128, 8194, 8192, sms) == 2      # ... and K % 4 != 0: padded
    assert k("wgmma", "tf32x3", square, 300, 1337, 260, sms) == 2       # 10 tiles, 42 k-tiles of 32 (padded to 1344)
    assert k("mma", "tf32x3", square, 128, 8192, 8192, sms) == 1
    assert configs.work_units("wgmma", "fp16x3", square, 128, 8192, 8192, sms) == 128
    # The wgmma bf16 GEMM: two 128 x 128 tiles a CTA, never split; at a K % 8 != 0, tf32's GEMM
    # (one tile a CTA, split where few).
    assert k("wgmma", "bf16", square, 128, 8192, 8192, sms) == 1
    assert configs.work_units("wgmma", "bf16", square, 1024, 8192, 8192, sms) == 4 * 64
    assert configs.work_units("wgmma", "bf16", square, 1000, 8192, 8100, sms) == 4 * 64
    assert configs.work_units("wgmma", "bf16", square, 1024, 8196, 8192, sms) == 8 * 64
    assert k("wgmma", "bf16", square, 128, 8196, 8192, sms) == 2


def test_the_split_k_limits_are_the_kernels():
    """configs' split-K and few-row limits, read from the CUDA that applies them."""
    import re

    from kgen.codegen.generator import CODEGEN_DIR

    def constant(file, pattern):
        found = re.findall(pattern, (CODEGEN_DIR / "kernels" / file).read_text())
        assert len(found) == 1, (file, pattern, found)
        return int(found[0])

    assert constant("gemm_wgmma_ws.cuh", r"static constexpr int kMinKTiles = (\d+);") == configs.SPLIT_K_MIN_K_TILES
    assert constant("gemm_wgmma_ws.cuh", r"static constexpr int kMaxSplits = (\d+);") == configs.SPLIT_K_MAX_SPLITS
    assert constant("gemm_wgmma_ws.cuh", r"static constexpr bool kSplitsK = BN <= (\d+);") == configs.SPLIT_K_MAX_BN
    assert constant("gemm_skinny.cuh", r"static constexpr int kMaxRows = (\d+);") == configs.SKINNY_MAX_ROWS
    assert constant("gemm_wgmma_f16x3.cuh", r"static constexpr int BK = (\d+);") == configs.FP16X3_BK
    assert constant("gemm_wgmma_round16.cuh", r"static constexpr int kRows = (\d+) \* BM;") == configs.ROUND16_TILES_PER_CTA
    assert constant("gemm_wgmma_round16.cuh", r"if \(K % (\d+) != 0 \|\| K == 0") == configs.ROUND16_K_MULTIPLE
    # (at most BM rows: CTAs of one tile, Narrow; one row of CTAs, as launch_tiles counts either way)
    tile = configs.RULE_WGMMA_ROUND16_TILES[0]
    for math in ("bf16", "fp16"):
        assert configs.launch_tiles("wgmma", math, tile, tile.bm, 1024, 1024) == 1024 // tile.bn
        assert configs.launch_tiles("wgmma", math, tile, 2 * tile.bm + 1, 1024, 1024) == 2 * 1024 // tile.bn
    # splits_for's rule: SMs // tiles, then the two caps, at least 1.
    source = (CODEGEN_DIR / "kernels" / "gemm_wgmma_ws.cuh").read_text()
    rule = source[source.index("static int splits_for(long long tiles, int k_tiles)"):][:400]
    for line in ("s = ws_detail::sm_count() / tiles;", "s = std::min<long long>(s, k_tiles / kMinKTiles);",
                 "s = std::min<long long>(s, kMaxSplits);", "std::max<long long>(s, 1)"):
        assert line in rule, line
    # SplitK::splits_at, the rule both GEMMs call: the few-row batches that SkinnyGemm runs,
    # unsplit; k-tiles of the GEMM's BK. Each GEMM's condition: tf32x3 only to 128 wide and where
    # TMA reads K, fp16x3 where K % 8 == 0 (else tf32x3's GEMM runs).
    at = source[source.index("static int splits_at(int M, int N, int K, bool splits_k) {"):][:400]
    assert "!splits_k || K == 0 || M <= SkinnyGemm<float>::kMaxRows" in at
    assert "splits_for(tiles, K / BK + (K % BK != 0))" in at

    def splits_for(file):
        text = (CODEGEN_DIR / "kernels" / file).read_text()
        body = text[text.index("static int splits_for(int M, int N, int K) {"):]
        return body[:body.index("\n")]

    assert "splits_at<BK>(M, N, K, kSplitsK && K % 4 == 0)" in splits_for("gemm_wgmma_ws.cuh")
    assert "splits_at<BK>(M, N, K, K % 8 == 0)" in splits_for("gemm_wgmma_f16x3.cuh")


def test_the_rule_counts_the_gpus_own_sms():
    """On a Hopper with fewer SMs than the H100's 132, 64 split tiles of 128x128 fill it sooner:
    fastest_family takes the GPU's count, as the kernels and the rule's tiles do. (96 rows: below
    FP16X3_MIN_HARMONIC, so that only w in registers can take fp16x3.)"""
    shape = (96, 8192, 8192)
    assert configs.fastest_family(configs.WGMMA_ARCH, *shape) == ("wgmma", "fp16x3")
    # 200 SMs: 64 tiles split 3 ways in K (192 CTAs) still fill it; 1024 SMs: 64 x 8 do not
    assert configs.fastest_family(configs.WGMMA_ARCH, *shape, sms=200) == ("wgmma", "fp16x3")
    assert configs.fastest_family(configs.WGMMA_ARCH, *shape, sms=1024) == ("wgmma", "tf32x3")


def test_the_row_kernels_warps_are_the_kernels():
    """The lowering shares a large group's statistics among the row kernel's warps
    (forward.ROW_KERNEL_WARPS): the kernels' kRowThreads / 32."""
    import re

    from kgen.codegen.generator import CODEGEN_DIR
    from kgen.lower.forward import ROW_KERNEL_WARPS

    stages = (CODEGEN_DIR / "kernels" / "stages.cuh").read_text()
    threads = int(re.search(r"constexpr int kRowThreads = (\d+);", stages).group(1))
    assert ROW_KERNEL_WARPS == threads // 32


@pytest.mark.parametrize("math", ["bf16", "fp16"])
def test_a_wgmma_round16_files_batchnorm_partials_are_its_epilogue_tiles(math):
    """The wgmma bf16 / fp16 GEMM's CTA spans two tiles of rows (kRows = 2 BM) but runs its
    epilogue, and takes BatchNorm's partials, per tile of BM rows (kTileM): the emitted file's
    kGemmTileM, by which the workspace's partials are counted (forward.cuh, stats_tiles), is that
    BM. The products' type is the math's."""
    from kgen.codegen import generator
    from kgen.codegen.generator import CODEGEN_DIR
    from kgen.tune.spec import Spec

    spec = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math=math, backend="wgmma", fusion=2,
                   tile=configs.RULE_WGMMA_ROUND16_TILES[0])
    source = generator.render_cuda_source(spec)
    assert f"constexpr int kGemmTileM = {spec.tile.bm};" in source
    t = {"bf16": "__nv_bfloat16", "fp16": "__half"}[math]
    assert f"kgen::WgmmaWsRound16Gemm<{t}, {spec.tile.bm}, {spec.tile.bn}," in source
    kernel = (CODEGEN_DIR / "kernels" / "gemm_wgmma_round16.cuh").read_text()
    assert "static constexpr int kTileM = BM;" in kernel
    assert "using Epilogue = WsEpilogue<BM, BN>;" in kernel
    assert "Epilogue::template run<EPI>(sub, t, mh, n0, M, N, p);" in kernel
