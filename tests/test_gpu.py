"""GPU tier: build every family and math mode, validate at KernelBench's shape and at odd
shapes, both problems, training and eval. Run with `pytest -m gpu` on a CUDA machine."""

import math
import os

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.search import Candidate
from kgen.check.loading import EmittedFile
from kgen.tune.spec import Spec, Tile, gemm_family
from kgen.check.validate import validate

from conftest import build_once

pytestmark = pytest.mark.gpu

# (backend, math, fusion, tolerance the mode must pass): fp32-accurate modes at KernelBench's
# 1e-4; TF32 at 1e-2; BF16 is only required to run and stay within 5e-2 of fp64 (it fails 1e-2
# by design and a search discards it there).
VARIANTS = [
    ("kgen", "fp32_simt", 2, 1e-4),
    ("kgen", "fp32_simt", 1, 1e-4),
    ("kgen", "tf32x3", 2, 1e-4),
    ("kgen", "tf32x3", 1, 1e-4),
    ("kgen", "tf32", 2, 1e-2),
    ("kgen", "bf16", 2, 5e-2),
    ("wgmma", "tf32x3", 2, 1e-4),
    ("wgmma", "tf32x3", 1, 1e-4),
    ("wgmma", "fp16x3", 2, 1e-4),
    ("wgmma", "fp16x3", 1, 1e-4),
    ("wgmma", "tf32", 2, 1e-2),
    ("cublas", "fp32_simt", 1, 1e-4),
    ("cublas", "tf32", 1, 1e-2),
]
PROBLEMS = ["gemm_scale_bn", "gemm_bn_scale_softmax"]
# (in_features, out_features): K % 4 != 0 takes the scalar-load (and, for wgmma, the non-TMA)
# path; (260, 36) keeps TMA but ends K mid-tile and N inside the first tile; (264, 36) too, with
# K a multiple of 8 (fp16x3's own GEMM; the others run its tf32x3 one).
RAGGED = [(257, 300), (1001, 77), (3, 5), (260, 36), (264, 36)]
# (backend, math, tol): wgmma tf32 reads w as it is on both of its paths (TMA and, K % 4 != 0, not).
RAGGED_VARIANTS = [("kgen", "fp32_simt", 1e-4), ("kgen", "tf32x3", 1e-4), ("wgmma", "tf32x3", 1e-4), ("wgmma", "fp16x3", 1e-4),
                   ("wgmma", "tf32", 1e-2)]


# One tile per GEMM family, valid for every math mode of the family.
TILES = {
    "simt": Tile(128, 128, 8, 64, 64, tm=8, tn=16),
    "mma": Tile(128, 128, 32, 64, 32, stages=3),
    "wgmma": Tile(128, 128, 32, 16, 128, stages=4),
}
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


# fp16x3 stages four fp16 tiles (hi and lo of x and w): 3 stages at 128x128.
FP16X3_TILE = Tile(128, 128, 32, 16, 128, stages=3)


def spec_for(problem, backend, math, fusion, batch, n_in, n_out) -> Spec:
    tile = FP16X3_TILE if math == "fp16x3" else TILES.get(gemm_family(backend, math))
    return Spec.of(problem, batch, n_in, n_out, math=math, backend=backend, fusion=fusion, tile=tile)


def make(tmp_path, *args) -> EmittedFile:
    spec = spec_for(*args)
    if spec.family == "wgmma" and not HOPPER:
        pytest.skip("the wgmma GEMM needs a Hopper (sm_90) GPU")
    return EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))


def all_specs():
    for p in PROBLEMS:
        for backend, math, fusion, _ in VARIANTS:
            yield spec_for(p, backend, math, fusion, 1000, 1000, 1000)
            yield spec_for(p, backend, math, fusion, 1024, 8192, 8192)
        for n_in, n_out in RAGGED:
            for backend, math, _ in RAGGED_VARIANTS:
                yield spec_for(p, backend, math, 2, 129, n_in, n_out)


@pytest.fixture(scope="module", autouse=True)
def prebuilt(tmp_path_factory):
    """Compile every extension this module uses in parallel up front; torch caches builds by
    name (which hashes the source), so each test then loads its extension without compiling.
    A variant that fails to build fails its own tests with the compiler's message."""
    if not torch.cuda.is_available():
        return
    d = tmp_path_factory.mktemp("prebuilt")
    specs = {s.name(): s for s in all_specs() if s.family != "wgmma" or HOPPER}.values()
    candidates = [Candidate(s, generator.write(s, d / f"{s.name()}.py")) for s in specs]
    build_once(tmp_path_factory, "test_gpu", candidates, jobs=max(1, (os.cpu_count() or 2) // 2), timeout=1200,
               echo=print)


def assert_valid(results):
    failed = [r.line() for r in results if not r.passed]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("backend, math, fusion, tol", VARIANTS)
def test_odd_shape_full_validation(tmp_path, problem, backend, math, fusion, tol):
    """in 1000 / out 1000 (not tile multiples), every check of DESIGN.md section 6."""
    f = make(tmp_path, problem, backend, math, fusion, 1000, 1000, 1000)
    assert_valid(validate(f, tol=tol))


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("backend, math, fusion, tol", [v for v in VARIANTS if v[2] == 2 or v[0] == "cublas"])
def test_kernelbench_shape(tmp_path, problem, backend, math, fusion, tol):
    f = make(tmp_path, problem, backend, math, fusion, 1024, 8192, 8192)
    assert_valid(validate(f, tol=tol, quick=True))


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("n_in, n_out", RAGGED)
def test_ragged_features(tmp_path, problem, n_in, n_out):
    """Ragged K and N: the scalar-load paths, TMA's zero fill, tiles that are mostly edge."""
    for backend, math, tol in RAGGED_VARIANTS:
        if backend == "wgmma" and not HOPPER:
            continue
        f = make(tmp_path, problem, backend, math, 2, 129, n_in, n_out)
        assert_valid(validate(f, tol=tol, quick=True))


@pytest.mark.parametrize("backend, split_math", [("kgen", "tf32x3"), ("wgmma", "tf32x3"), ("wgmma", "fp16x3")])
def test_tf32x3_is_as_accurate_as_sgemm(tmp_path, backend, split_math):
    """On problem-33 inputs the split-operand GEMMs (3xTF32, three fp16 products) stay within 2x
    of cuBLAS SGEMM's error vs fp64."""
    torch.backends.cuda.matmul.allow_tf32 = False
    errors = {}
    for name, args in (("split", (backend, split_math, 2)), ("sgemm", ("cublas", "fp32_simt", 1))):
        f = make(tmp_path, "gemm_scale_bn", *args, 1024, 8192, 8192)
        r = validate(f, tol=1e-4, quick=True)
        assert all(x.passed for x in r), (name, [x.line() for x in r if not x.passed])
        # (The NaN / Inf checks report no finite error.)
        errors[name] = max(x.max_abs for x in r if math.isfinite(x.max_abs))
    assert errors["split"] <= 2 * errors["sgemm"], errors


def test_validation_catches_a_wrong_kernel(tmp_path):
    """The gate has teeth: a file whose kernel computes the wrong thing fails validation."""
    f = make(tmp_path, "gemm_scale_bn", "kgen", "fp32_simt", 2, 256, 256, 256)
    broken = f.path.read_text().replace("const float a = g / sqrtf(var + f.eps);",
                                        "const float a = 1.001f * g / sqrtf(var + f.eps);")
    assert broken != f.path.read_text()
    f.path.write_text(broken)
    results = validate(EmittedFile(f.path), tol=1e-4, quick=True)
    assert not all(r.passed for r in results)


def test_runoff_times_each_contender_right_after_eager(tmp_path):
    """The search's runoff (a request to its GPU worker) on two prebuilt variants of problem 33 at
    KernelBench's shape: every round times each file once, right after eager."""
    from kgen.tune.search import RUNOFF_ROUNDS, Evaluator, run_runoff, runoff_order

    files = [make(tmp_path, "gemm_scale_bn", *v, 1024, 8192, 8192)
             for v in (("cublas", "fp32_simt", 1), ("kgen", "tf32x3", 2))]
    contenders = [Candidate(f.spec, f.path) for f in files]
    evaluator = Evaluator([1e-4], None, 30, 300, print, lambda c: None, total=0, gpus=[0])
    try:
        times, error = run_runoff(contenders, 300, evaluator.worker_on(0))
    finally:
        evaluator.finish()
    assert times is not None, error
    assert len(times["eager"]) == 2 * RUNOFF_ROUNDS
    assert all(len(times[str(f.path)]) == RUNOFF_ROUNDS and min(times[str(f.path)]) > 0 for f in files)
    # 3xTF32 on tensor cores (~0.4x eager) against cuBLAS SGEMM (~1x): the runoff must rank them so
    assert runoff_order(contenders, times)[0].spec.math == "tf32x3", times
