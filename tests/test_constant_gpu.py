"""GPU tier of a constant output (KernelBench 80, tests/refs/gemm_max_sub_gelu.py: rewrites make
the output 0, no GEMM): the emitted file gives NaN exactly where torch does for NaN and
infinities in rows of x, a NaN or an infinity in W and a NaN in the bias (kernels/constant.cuh),
passes the full validation at 1e-4, and stays far below eager's time at KernelBench's shape
(it reads x and W once)."""

from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import validate
from kgen.codegen import generator
from kgen.tune.search import Candidate, build_all
from kgen.tune.spec import Spec, Tile

pytestmark = pytest.mark.gpu

REF = str(Path(__file__).parent / "refs" / "gemm_max_sub_gelu.py")
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
TILES = {"wgmma": Tile(128, 128, 32, 16, 128, stages=4), "kgen": Tile(128, 128, 32, 64, 32, stages=3)}
BACKEND = "wgmma" if HOPPER else "kgen"
# (batch, in, out): K a multiple of 4 (x's rows read 16 bytes at a time) and not; KernelBench's.
SHAPES = {"odd": (257, 528, 300), "odd_k": (257, 301, 300), "kernelbench": (1024, 8192, 8192)}


def spec(shape: str) -> Spec:
    return Spec.of(REF, *SHAPES[shape], math="tf32x3", backend=BACKEND, fusion=1, tile=TILES[BACKEND])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("constant")
    specs = [spec(s) for s in SHAPES] if torch.cuda.is_available() else []
    candidates = [Candidate(s, generator.write(s, d / f"{s.name()}.py")) for s in specs]
    build_all(candidates, 16, 600, lambda line: None)
    return {c.spec.name(): c.path for c in candidates}


def models(f, dtype=torch.float32):
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = f.Model(*f.init_args()).to(dtype)
        new = f.ModelNew(*f.init_args()).to(dtype)
    new.load_state_dict(model.state_dict())
    return model, new


POISONS = {
    "NaN and Inf in rows": [("x", (3, 5), "nan"), ("x", (10, -1), "inf"), ("x", (-1, 0), "-inf")],
    "NaN in W": [("w", (7, 11), "nan")],
    "Inf in W": [("w", (-1, -1), "inf")],
    "NaN in the bias": [("b", (-1,), "nan")],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", POISONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_nan_pattern_is_torchs(files, shape, case, dtype):
    if dtype != torch.float32 and not HOPPER:
        pytest.skip("a 16-bit module needs the wgmma build (Hopper)")
    f = EmittedFile(files[spec(shape).name()])
    model, new = models(f, dtype)
    batch, k, _ = SHAPES[shape]
    x = torch.rand(batch, k, device="cuda", dtype=dtype)
    for m in (model, new):
        with torch.no_grad():
            for what, index, value in POISONS[case]:
                if what == "x":
                    continue
                {"w": m.gemm.weight, "b": m.gemm.bias}[what][index] = float(value)
    for what, index, value in POISONS[case]:
        if what == "x":
            x[index] = float(value)
    with torch.no_grad():
        out, expect = new(x), model(x)
    assert expect.isnan().any()
    assert out.dtype == expect.dtype and out.shape == expect.shape
    assert torch.equal(out.isnan(), expect.isnan()), (out.isnan().nonzero()[:8], expect.isnan().nonzero()[:8])
    assert torch.equal(out.nan_to_num(), expect.nan_to_num())
    # A clean call after the poisoned one is the constant again (the flag is reset per call).
    for m in (model, new):
        with torch.no_grad():
            m.gemm.weight.nan_to_num_(0.0, 0.0, 0.0)
            m.gemm.bias.nan_to_num_(0.0, 0.0, 0.0)
    with torch.no_grad():
        clean = new(torch.rand(batch, k, device="cuda", dtype=dtype))
    assert torch.equal(clean, torch.zeros_like(clean))


@pytest.mark.parametrize("shape", ["odd", "odd_k"])
def test_full_validation(files, shape):
    """The full gate, its gradients checked (zeros, as torch's: the output is a constant) and its
    training check run."""
    f = EmittedFile(files[spec(shape).name()])
    results = validate(f, tol=1e-4)
    judged = [r for r in results if r.name.startswith(("gradients", "training"))]
    assert judged and all("not checked" not in r.detail for r in judged), [r.line() for r in judged]
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]


def test_kernelbench_shape_is_fast_and_validates(files):
    """Quick validation at 1024 x 8192 -> 8192, and the forward's time against eager's: reading
    W (256 MB) and x once is ~0.1 ms on an H100, eager's GEMM ~2.7 ms."""
    f = EmittedFile(files[spec("kernelbench").name()])
    results = validate(f, tol=1e-4, quick=True)
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]
    model, new = models(f)
    x = torch.rand(1024, 8192, device="cuda")

    def timed(fn) -> float:
        with torch.no_grad():
            for _ in range(3):
                fn(x)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                fn(x)
            end.record()
            torch.cuda.synchronize()
        return start.elapsed_time(end) / 20

    ours, eager = timed(new), timed(model)
    print(f"constant output with NaN flags: {ours:.3f} ms; eager {eager:.3f} ms")
    assert ours < 0.5 * eager
