"""The tables of kgen/tune/configs.py hold together: every tile the shape rule may pick is one the
search tries (so a search can confirm or beat what `kgen generate` chose)."""

import pytest

from kgen.tune import configs
from kgen.tune.search import enumerate_specs


@pytest.mark.parametrize("family", sorted(configs.RULE_TILES))
def test_every_rule_tile_is_in_the_search_space(family):
    arch = configs.WGMMA_ARCH   # the largest limits: every tile of the lists is valid there
    math = "fp32_simt" if family == "simt" else "tf32x3"
    specs = enumerate_specs("gemm_scale_bn", 1024, 1024, 1024, maths=(math,), arch=arch, include_cublas=False)
    searched = {s.tile for s in specs if s.family == family}
    for tile in configs.RULE_TILES[family]:
        assert tile in searched, f"{family} tile {tile} of the shape rule is not in the search space"


def test_the_default_target_is_the_wgmma_one():
    assert configs.fastest_family(configs.DEFAULT_ARCH) == ("wgmma", "tf32x3")
    assert configs.fastest_family("sm_80") == ("kgen", "tf32x3")
