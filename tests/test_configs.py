"""The tables of kgen/tune/configs.py hold together: every tile the shape rule may pick is one the
search tries (so a search can confirm or beat what `kgen generate` chose)."""

import pytest

from kgen.tune import configs
from kgen.tune.search import enumerate_specs


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
    ((1024, 8192, 8192), "fp16x3"),     # KernelBench 33, 12, 84: M N / (M + N) = 910
    ((16384, 4096, 4096), "fp16x3"),    # 39
    ((128, 32768, 32768), "fp16x3"),    # 55, 56, 59: w split in the GEMM's registers (no pass over its 4 GB)
    ((128, 8192, 8192), "tf32x3"),      # 64 tiles: tf32x3's split-K fills the GPU, fp16x3 has none
    ((1024, 8190, 8192), "tf32x3"),     # K not a multiple of 8: fp16 rows TMA cannot read
    ((256, 8192, 8192), "tf32x3"),      # 248, below FP16X3_MIN_HARMONIC
])
def test_the_rule_takes_fp16x3_where_its_split_pays(shape, math):
    assert configs.fastest_family(configs.WGMMA_ARCH, *shape) == ("wgmma", math)
    assert configs.fastest_family("sm_80", *shape) == ("kgen", "tf32x3")
