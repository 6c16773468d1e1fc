import dataclasses
import json
from pathlib import Path

import pytest

from kgen.codegen.generator import render_cuda_source
from kgen.tune.search import enumerate_specs
from kgen.tune.spec import (ARCH_LIMITS, SPEC_FIELDS, Spec, SpecError, Tile, Variant, Workload, arch_for_capability,
                        spec_smem_bytes)

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
    (dict(backend="wgmma", math="fp32_simt", tile=WGMMA), "implements tf32x3, fp16x3, tf32, bf16, fp16, not fp32_simt"),
    (dict(backend="wgmma", math="bf16", tile=Tile(128, 256, 32, 16, 256, stages=3)), "wgmma bf16 tiles are 128x128"),
    (dict(backend="kgen", math="fp16x3"), "fp16x3 runs on kgen's Hopper GEMM only"),
    (dict(backend="kgen", math="fp16", tile=WGMMA), "fp16 runs on kgen's Hopper GEMM only"),
    (dict(backend="cublas", math="fp16"), "fp16 runs on kgen's Hopper GEMM only"),
    (dict(backend="wgmma", math="fp16", tile=Tile(128, 64, 32, 16, 64, stages=3)), "wgmma fp16 tiles are 128x128"),
    # fp16x3's four operand tiles: 4 stages of 128x128 are 256 KB.
    (dict(backend="wgmma", math="fp16x3", tile=WGMMA), "shared memory"),
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
        assert {s.math for s in specs} == {"fp32_simt", "tf32x3", "fp16x3", "tf32", "bf16", "fp16"}


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


# ---- the two halves: the workload and the code variant ----------------------------------------
REFS = Path(__file__).resolve().parent / "refs"
SWISH = str(REFS / "gemm_swish_scale.py")   # scaling_factor is a literal of the kernel source


@pytest.mark.parametrize("tile, phrase", [
    (Tile(128, 128, 32, 64, 32, stages=1), "stages"),
    (Tile(120, 128, 32, 40, 32, stages=3), "BM=120 must be a multiple of 16"),
    (Tile(128, 128, 32, 64, 64, stages=3), "partial"),
])
def test_a_bad_tile_is_a_variant_error_whatever_the_workload(tile, phrase):
    with pytest.raises(SpecError, match=phrase):
        Variant(math="tf32x3", tile=tile)   # no workload at all
    for workload in (Workload("gemm_scale_bn", 1024, 8192, 8192), Workload("gemm_bn_scale_softmax", 16, 24, 40),
                     Workload(SWISH, 8, 16, 32, (("scaling_factor", 3.0),))):
        with pytest.raises(SpecError, match=phrase):
            Spec(workload, Variant(math="tf32x3", tile=tile))
    Variant(math="tf32x3", tile=MMA)   # the same variant with a good tile is fine on its own


@pytest.mark.parametrize("args, phrase", [
    (("nope", 8, 16, 32), "unknown problem"),
    (("gemm_scale_bn", 0, 16, 32), "batch must be a positive integer"),
    (("gemm_scale_bn", 8, 16.0, 32), "in_features must be a positive integer"),
    (("gemm_scale_bn", 8, 16, 10**10), "elements"),
    (("gemm_scale_bn", 8, 16, 32, (("b", 1), ("a", 2))), "sorted"),
    (("gemm_scale_bn", 8, 16, 32, (("a", True),)), "sorted \\(name, number\\) pairs"),
])
def test_a_bad_workload_is_a_workload_error_whatever_the_variant(args, phrase):
    with pytest.raises(SpecError, match=phrase):
        Workload(*args)
    # Spec.of validates the workload first: its error is the one reported, even with a bad tile.
    with pytest.raises(SpecError, match=phrase):
        Spec.of(*args[:4], constants=args[4] if len(args) > 4 else (), math="tf32x3",
                tile=Tile(120, 128, 32, 40, 32, stages=3))


def test_spec_is_the_pair_and_reads_the_flat_names():
    s = spec(math="tf32x3", tile=MMA, batch=64, in_features=128, out_features=256)
    assert s == Spec(Workload("gemm_scale_bn", 64, 128, 256), Variant("tf32x3", "kgen", 2, MMA))
    assert (s.problem, s.batch, s.in_features, s.out_features, s.constants) == ("gemm_scale_bn", 64, 128, 256, ())
    assert (s.math, s.backend, s.fusion, s.tile, s.arch, s.family) == ("tf32x3", "kgen", 2, MMA, "sm_90a", "mma")
    assert s.name() == f"{s.workload.shape_name()}_{s.variant.name()}" == \
        "gemm_scale_bn_b64_i128_o256_tf32x3_f2_t128x128x32_w64x32_s3_g8"
    assert s.config_name() == "gemm_scale_bn_tf32x3_f2_t128x128x32_w64x32_s3_g8"
    with pytest.raises(TypeError, match="Spec.of"):
        Spec("gemm_scale_bn", Variant(tile=SIMT))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.workload = Workload("gemm_scale_bn", 1, 1, 1)


def test_the_flat_record_is_unchanged():
    """KGEN_SPEC, results/*.json and generated/index.json keep one flat dict of both halves."""
    s = Spec.of(SWISH, 8, 16, 32, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA,
                constants=(("scaling_factor", 3.0),))
    d = s.to_dict()
    assert d == {"problem": SWISH, "batch": 8, "in_features": 16, "out_features": 32, "math": "tf32x3",
                 "backend": "wgmma", "fusion": 1, "arch": "sm_90a", "constants": [["scaling_factor", 3.0]],
                 "tile": {"bm": 128, "bn": 128, "bk": 32, "wm": 16, "wn": 128, "tm": 0, "tn": 0, "stages": 4,
                          "group_m": 8}}
    assert tuple(d) == SPEC_FIELDS
    assert Spec.from_dict(d) == s and Workload.from_dict(d) == s.workload and Variant.from_dict(d) == s.variant
    assert Spec.from_dict(json.loads(json.dumps(d))) == s
    with pytest.raises(TypeError):
        Spec.from_dict({**d, "colour": "red"})   # a record of fields this kgen does not know
    with pytest.raises(TypeError):
        Spec.from_dict({k: v for k, v in d.items() if k != "batch"})


def test_replace_sends_each_field_to_its_half():
    s = spec(math="tf32x3", tile=MMA)
    moved = s.replace(problem=SWISH, batch=8)
    assert moved.variant is s.variant and moved.workload == Workload(SWISH, 8, 8192, 8192)
    assert s.replace(tile=WGMMA, backend="wgmma").workload is s.workload
    with pytest.raises(SpecError, match="batch must be"):
        s.replace(batch=0)
    with pytest.raises(TypeError, match="no field colour"):
        s.replace(colour="red")


def test_workloads_share_a_build_only_when_the_source_is_the_same():
    """The build key hashes the rendered CUDA source: one variant over several workloads shares
    a build exactly where the source is equal. A shape is not in the source; a constant the
    kernel bakes in as a literal is; another module is."""
    variant = Variant(math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA)
    workloads = {
        "small": Workload(SWISH, 128, 256, 512),
        "other shape": Workload(SWISH, 64, 512, 256),
        "scale 3": Workload(SWISH, 128, 256, 512, (("scaling_factor", 3.0),)),
        "other module": Workload("gemm_scale_bn", 128, 256, 512),
    }
    specs = {name: Spec(w, variant) for name, w in workloads.items()}
    for a in specs.values():
        for b in specs.values():
            same_source = render_cuda_source(a) == render_cuda_source(b)
            assert (a.key() == b.key()) == same_source
            if same_source:
                assert a.config_name() == b.config_name()   # the source names the variant
    small = specs["small"]
    assert specs["other shape"].key() == small.key() and specs["other shape"].name() != small.name()
    # The constant: same config name (the variant without the workload), other code.
    assert specs["scale 3"].config_name() == small.config_name() and specs["scale 3"].key() != small.key()
    assert specs["other module"].key() != small.key()
    assert specs["other module"].config_name() != small.config_name()


def test_a_workload_is_identified_by_the_references_content(tmp_path):
    """A copy of the reference elsewhere is the same workload to every cache (same sha256, same
    identity) and the same build; an edit of the text is another workload even where the code
    it makes is unchanged."""
    text = Path(SWISH).read_text()
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "gemm_swish_scale.py"
    copy.write_text(text)
    edited = tmp_path / "gemm_swish_scale.py"
    edited.write_text(text + "# an edit that changes no computation\n")
    variant = Variant(math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA)
    original, moved, changed = (Spec(Workload(str(p), 128, 256, 512), variant) for p in (SWISH, copy, edited))
    assert moved.workload != original.workload   # another path...
    assert moved.workload.sha256 == original.workload.sha256   # ...the same content
    assert moved.workload.identity() == original.workload.identity()
    assert moved.key() == original.key()
    assert changed.workload.sha256 != original.workload.sha256
    assert changed.workload.identity() != original.workload.identity()
    assert changed.key() == original.key()   # the code does not change with a comment
    assert Workload(SWISH, 64, 256, 512).identity() != original.workload.identity()


def test_the_search_is_one_workload_and_many_variants():
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192)
    assert len(specs) > 10
    assert {s.workload for s in specs} == {Workload("gemm_scale_bn", 1024, 8192, 8192)}
    assert len({s.variant for s in specs}) == len(specs)
    assert {s.variant.name() for s in specs} == {s.name()[len("gemm_scale_bn_b1024_i8192_o8192_"):] for s in specs}
