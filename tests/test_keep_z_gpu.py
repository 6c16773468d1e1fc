"""GPU tier of a point-wise part's training forward (kernels/backward.cuh, forward_keeping_z):
where autograd will want the backward, the GEMM's epilogue stores z for it and the output in one
pass over the tile (KeepingZ, common.cuh), in every kgen GEMM family and dtype, on the fast
paths (16-byte stores) and the scalar ones (N % 8 != 0), at a batch the few-row GEMM takes, one
split-K takes and a full one. The output must be bit for bit the no-grad forward's (the same GEMM
and epilogue on the same accumulator; the two-pass forward before session 49 gave those bits too),
no point-wise pass may run after the GEMM, and the backward, which reads the kept z, must pass
kgen's full gate. cuBLAS's files keep the two passes (their GEMM is outside the kernels)."""

from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import validate
from kgen.codegen import generator
from kgen.tune.search import Candidate, build_all
from kgen.tune.spec import Spec, Tile

from conftest import build_once

pytestmark = pytest.mark.gpu

REF = str(Path(__file__).parent / "refs" / "gemm_mul_leakyrelu.py")
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
WGMMA_TILE = Tile(128, 128, 32, 16, 128, stages=4)
# name: (backend, math, fusion, tile, (in_features, out_features), dtypes, the gate's tolerance).
# 257 -> 77: K off TMA's 16-byte rows (the wgmma files' fallback GEMM), N off 4 and 8 (scalar stores).
CASES = {
    "wgmma_tf32x3": ("wgmma", "tf32x3", 2, WGMMA_TILE, (4096, 4096), ("fp32", "bf16", "fp16"), 1e-4),
    "wgmma_fp16x3": ("wgmma", "fp16x3", 2, Tile(128, 128, 32, 16, 128, stages=3), (4096, 4096), ("fp32",), 1e-4),
    "wgmma_ragged": ("wgmma", "tf32x3", 2, WGMMA_TILE, (257, 77), ("fp32", "bf16"), 1e-4),
    # bf16 products of fp32 operands (gemm_wgmma_round16.cuh: two 128-row passes of the epilogue a
    # CTA), held to 5e-2 as kgen's other bf16 GEMMs are (tests/test_gpu.py).
    "wgmma_round16": ("wgmma", "bf16", 2, Tile(128, 128, 32, 16, 128, stages=3), (4096, 4096), ("fp32",), 5e-2),
    "mma_tf32x3": ("kgen", "tf32x3", 2, Tile(128, 128, 32, 64, 32, stages=3), (4096, 4096), ("fp32",), 1e-4),
    "simt": ("kgen", "fp32_simt", 2, Tile(128, 128, 8, 64, 64, tm=8, tn=16), (1024, 1024), ("fp32",), 1e-4),
    "cublas_tf32": ("cublas", "tf32", 1, None, (4096, 4096), ("fp32",), 1e-2),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# 7: the wgmma files' few-row GEMM (gemm_skinny.cuh); 64: split-K where M leaves most SMs idle
# (the warp-specialized GEMM's, at K = 4096); 1024: every SM busy.
BATCHES = (7, 64, 1024)
CALLS = [(name, dtype, batch) for name, case in CASES.items() for dtype in case[5] for batch in BATCHES]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not HOPPER:
        return {}
    d = tmp_path_factory.mktemp("keep_z")
    candidates = {}
    for name, (backend, math, fusion, tile, (k, n), _, _) in CASES.items():
        spec = Spec.of(REF, 1024, k, n, math=math, backend=backend, fusion=fusion, tile=tile)
        candidates[name] = Candidate(spec, generator.write(spec, d / f"{name}.py"))
    build_once(tmp_path_factory, "keep_z", list(candidates.values()), 8, 900, lambda line: None)
    for dtype in ("bf16", "fp16"):
        build_all([c for name, c in candidates.items() if dtype in CASES[name][5]], 8, 900, lambda line: None,
                  dtype=dtype)
    return {name: EmittedFile(c.path) for name, c in candidates.items()}


def needs_hopper():
    if not HOPPER:
        pytest.skip("the wgmma files (and these tests' tiles) need a Hopper (sm_90) GPU")


def forward_kernels(model, x) -> tuple[torch.Tensor, list[str]]:
    """The training forward's output (gradients wanted: z kept) and the names of the CUDA kernels
    it ran."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = model(x)
        torch.cuda.synchronize()
    return out, [e.key for e in prof.key_averages()]


@pytest.mark.parametrize("name,dtype,batch", CALLS, ids=lambda v: str(v))
def test_the_training_forward_keeps_z_in_the_gemms_epilogue(files, name, dtype, batch):
    needs_hopper()
    f = files[name]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = f.ModelNew(*f.init_args()).to(DTYPES[dtype]).train()
    (x,) = [t.to("cuda", DTYPES[dtype]) for t in f.reference.inputs(batch)]
    model(x)   # (the first call builds and loads; the profile is of the second)
    kept, kernels = forward_kernels(model, x)
    assert kept.requires_grad, "no gradient wanted: the forward kept no z"
    with torch.no_grad():
        plain = model(x)
    assert torch.equal(kept.detach(), plain), "the forward that keeps z gave other bits than the no-grad one"
    pointwise = [k for k in kernels if "pointwise_kernel" in k and "backward" not in k]
    if CASES[name][0] == "cublas":
        assert pointwise, kernels   # z from cuBLAS, then the point-wise pass
    else:
        assert not pointwise, kernels
        assert any("KeepingZ" in k for k in kernels), kernels


@pytest.mark.parametrize("name,dtype", [(n, d) for n, case in CASES.items() for d in case[5]])
def test_the_backward_from_the_kept_z_passes_the_gate(files, name, dtype):
    """kgen validate's every check, the gradients and training steps (whose backward reads the
    kept z) among them, at the batch that takes the few-row GEMM and at a full one."""
    needs_hopper()
    tol = CASES[name][6] if dtype == "fp32" else 1e-2
    for batch in (7, 1024):
        results = validate(files[name], tol=tol, batch=batch, dtype=DTYPES[dtype])
        assert all(r.passed for r in results), (batch, [r.line() for r in results if not r.passed])
