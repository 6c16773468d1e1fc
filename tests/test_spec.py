import pytest

from kgen.tune.search import enumerate_specs
from kgen.tune.spec import ARCH_LIMITS, Spec, SpecError, Tile, arch_for_capability, spec_smem_bytes

SIMT = Tile(128, 128, 8, 32, 64, tm=8, tn=8)
MMA = Tile(128, 128, 32, 64, 32, stages=3)
WGMMA = Tile(128, 128, 32, 16, 128, stages=4)


def spec(**kw):
    base = dict(problem="gemm_scale_bn", batch=1024, in_features=8192, out_features=8192, tile=SIMT)
    base.update(kw)
    return Spec.of(**base)


def test_key_is_stable_and_distinguishes_what_changes_the_code():
    assert spec().key() == spec().key()
    keys = {spec().key(), spec(math="tf32x3", tile=MMA).key(), spec(fusion=1).key(),
            spec(problem="gemm_bn_scale_softmax").key(), spec(arch="sm_80").key()}
    assert len(keys) == 5


def test_key_ignores_the_shape_so_shapes_share_a_build():
    """Problems 33 and 39 with the same variant compile once: the shape is not in the code."""
    a = spec(math="tf32x3", tile=MMA)
    b = spec(math="tf32x3", tile=MMA, batch=16384, in_features=4096, out_features=4096)
    assert a.name() != b.name() and a.key() == b.key()


def test_round_trip_through_dict():
    s = spec(math="tf32x3", tile=MMA)
    assert Spec.from_dict(s.to_dict()) == s
    assert Spec.from_dict(s.to_dict()).key() == s.key()


@pytest.mark.parametrize("kw, phrase", [
    (dict(problem="nope"), "unknown problem"),
    (dict(batch=0), "batch must be a positive integer"),
    (dict(in_features=-3), "in_features must be a positive integer"),
    (dict(math="fp8"), "unknown math mode"),
    (dict(fusion=3), "fusion must be one of"),
    (dict(backend="cublas", math="fp32_simt", fusion=1), "give no tile"),
    (dict(backend="cublas", tile=None, fusion=2), "only fusion level 1"),
    (dict(backend="cublas", tile=None, fusion=1, math="tf32x3"), "no tf32x3"),
    (dict(tile=None), "needs a tile"),
    (dict(tile=Tile(128, 128, 8, 48, 64, tm=8, tn=8)), "multiple of WM"),
    (dict(tile=Tile(128, 128, 8, 32, 64, tm=8, tn=4)), "must give 32 threads"),
    (dict(tile=Tile(128, 128, 8, 32, 64)), "thread tile"),
    (dict(math="tf32x3", tile=Tile(128, 128, 32, 64, 32, stages=1)), "stages"),
    (dict(math="tf32x3", tile=Tile(64, 128, 32, 8, 64, stages=3)), "16x8 mma tile"),
    (dict(math="tf32x3", tile=Tile(120, 128, 32, 40, 32, stages=3)), "BM=120 must be a multiple of 16"),
    (dict(math="tf32", tile=Tile(128, 256, 64, 64, 64, stages=4)), "shared memory"),
    (dict(math="tf32x3", tile=Tile(128, 128, 32, 64, 64, stages=3)), "partial"),
    (dict(backend="wgmma", math="bf16", tile=WGMMA), "implements tf32x3, tf32, not bf16"),
    (dict(backend="wgmma", math="tf32x3", tile=WGMMA, arch="sm_80"), "sm_90a only"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 128, 64, 16, 128, stages=4)), "BK=32"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(256, 128, 32, 16, 128, stages=4)), "BM must be 64 or 128"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 256, 32, 16, 256, stages=4)), "BN must be one of"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 128, 32, 64, 32, stages=4)), "warp tile is 16xBN"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 128, 32, 16, 128, stages=1)), ">= 2 pipeline stages"),
        (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 128, 32, 16, 128, stages=5)), "shared memory"),
    (dict(backend="wgmma", math="tf32x3", tile=Tile(128, 128, 32, 16, 128, stages=6)), "shared memory"),
])
def test_invalid_specs_say_why(kw, phrase):
    with pytest.raises(SpecError, match=phrase):
        spec(**kw)


def test_smaller_target_rejects_what_hopper_accepts():
    big = Tile(256, 128, 32, 64, 64, stages=4)
    spec(math="tf32", tile=big)  # fits sm_90a's 227 KB
    with pytest.raises(SpecError, match="sm_80 allows"):
        spec(math="tf32", tile=big, arch="sm_80")


def test_names_are_unique_across_the_search_space():
    for problem in ("gemm_scale_bn", "gemm_bn_scale_softmax"):
        specs = enumerate_specs(problem, 1024, 8192, 8192)
        assert len({s.name() for s in specs}) == len(specs)
        assert {s.family for s in specs} == {"simt", "mma", "wgmma", "cublas"}
        assert {s.math for s in specs} == {"fp32_simt", "tf32x3", "tf32", "bf16"}


def test_wgmma_tiles_follow_the_hopper_limits():
    spec(backend="wgmma", math="tf32", tile=Tile(128, 256, 32, 16, 256, stages=4))  # tf32: no partials
    spec(backend="wgmma", math="tf32x3", tile=Tile(64, 64, 32, 16, 64, stages=8))
    assert spec(backend="wgmma", math="tf32x3", tile=WGMMA).name().endswith(
        "_wgmma-tf32x3_f2_t128x128x32_w16x128_s4_g8")


def test_search_puts_wgmma_first_on_hopper_only():
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, maths=("tf32x3",), top=1)
    assert [(s.backend, s.fusion) for s in specs] == [("wgmma", 2), ("wgmma", 1)]
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, maths=("tf32x3",), arch="sm_80")
    assert specs and all(s.backend == "kgen" for s in specs)


@pytest.mark.parametrize("capability, arch", [((9, 0), "sm_90a"), ((8, 0), "sm_80"), ((8, 6), "sm_86"),
                                              ((8, 9), "sm_89"), ((12, 0), "sm_120"),
                                              ((10, 0), "sm_100"), ((7, 5), "sm_120")])
def test_search_targets_what_the_gpu_can_run(capability, arch):
    assert arch_for_capability(*capability) == arch
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, arch=arch_for_capability(*capability))
    assert any(s.family == "wgmma" for s in specs) == (arch == "sm_90a")


@pytest.mark.parametrize("arch", ["sm_86", "sm_89", "sm_120"])
def test_99_kb_targets_get_only_tiles_that_fit(arch):
    """sm_86 / sm_89 / sm_120 have 99 KB of shared memory per block, not sm_80's 163 KB."""
    assert ARCH_LIMITS[arch]["smem"] == 101376
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, arch=arch)
    assert {s.math for s in specs} == {"fp32_simt", "tf32x3", "tf32", "bf16"}
    assert all(spec_smem_bytes(s) <= 101376 for s in specs)
    with pytest.raises(SpecError, match=f"{arch} allows 101376"):
        spec(math="tf32x3", tile=Tile(128, 128, 64, 64, 32, stages=3), arch=arch)


@pytest.mark.parametrize("kw", [dict(batch=10**9), dict(in_features=10**9), dict(out_features=10**9),
                                dict(batch=2**16, in_features=2**16)])
def test_absurd_shapes_are_refused(kw):
    with pytest.raises(SpecError, match="elements"):
        spec(**kw)
