"""The matrix-vector rewrite (backend gemv: no GEMM, kernels/gemv.cuh) for modules in bf16 and
fp16: x and w read in the module's dtype, every sum in fp32, the row's value and each op after it
rounded to the dtype as torch's ops round. Eager rounds each element of z to the dtype before its
row sum; the rewrite never forms z, so it is nearer the exact result than eager, never further.

CPU: what a gemv file says and runs, and its fp32, bf16 and fp16 builds compile with their kernels
instantiated for the dtype. GPU (marked): the forward against fp64 of the rounded module with
eager in the dtype as the yardstick, at a K of whole 16-byte rows and at an odd K, and kgen
validate --dtype's full gate."""

import re
from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.search import enumerate_variants, half_variants
from kgen.tune.spec import Spec, Workload

from kgen.tune.configs import PRECISIONS

from conftest import REFS_DIR, nvcc_prefetch, prefetch_dir
from nvcc_jobs import NVCC, SM80, SM90A, report_job, spills
from test_half_gpu import DTYPES as HALF, max_err, trio

# KernelBench 51's kind of module, in a spelling of ours: a per-feature shift, the row's mean,
# row ops on that one value, and the module's input added back (a broadcast tail).
RESIDUAL_MEAN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.shift = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        residual = x.detach()
        y = self.proj(x) - self.shift
        y = y.mean(-1, keepdim=True)
        y = torch.logsumexp(y, 1, keepdim=True)
        return F.gelu(y) + residual


batch, features_in, features_out = 64, 96, 80


def get_inputs():
    return [torch.rand(batch, features_in)]


def get_init_inputs():
    return [features_in, features_out]
'''
SUM_ROWS = str(REFS_DIR / "gemm_sum_max_mean_lse.py")   # KernelBench 18's kind: a row sum, then row ops
# Each dtype's build's operand type (generator.OPERAND_BUILDS; fp32's is the default, float).
OPERANDS = {name: generator.OPERAND_BUILDS[PRECISIONS[name]] or "float" for name in ("fp32", "bf16", "fp16")}
# The operand type as a template argument in nvcc's report of a kernel (Itanium mangling):
# weighted_column_sum_kernel<GemvAffine, T, kVec> and gemv_rows_kernel<GemvAffine, GemvRows, T>.
MANGLED = {"float": "f", "__nv_bfloat16": "13__nv_bfloat16", "__half": "6__half"}


def residual_ref(folder: Path) -> str:
    path = folder / "residual_mean.py"
    path.write_text(RESIDUAL_MEAN)
    return str(path)


def gemv_spec(ref: str, batch: int, in_features: int, out_features: int) -> Spec:
    return Spec.of(ref, batch, in_features, out_features, math="fp32_simt", backend="gemv", fusion=1)


def test_a_gemv_file_runs_16_bit_modules_and_says_how(tmp_path):
    """Its builds are fp32, bf16 and fp16; the header's `16-bit:` line says what a 16-bit module
    runs; it pads no K (no TMA reads x and w) and names no GEMM of its own."""
    for ref in (SUM_ROWS, residual_ref(tmp_path)):
        spec = gemv_spec(ref, 64, 96, 96)
        assert generator.sixteen_bit_builds(spec) and generator.half_gemm_type(spec) is None
        text = generator.render(spec)
        assert ("_KGEN_OPERAND_BUILDS = {torch.float32: None, torch.bfloat16: '__nv_bfloat16', "
                "torch.float16: '__half'}") in text
        assert "16-bit:    a bf16 / fp16 module runs a build of its own: x and w read in its dtype" in text
        source = generator.render_cuda_source(spec)
        assert "constexpr bool kPadsK = false;" in source
        assert "#include <cuda_bf16.h>" in source and "static_assert(std::is_same<kgen_operand_t, float>" not in source
        # the row's value rounded as torch's reduction returns it (the identity in fp32)
        assert "const float r = kgen::rounded_to_module<kgen_operand_t>(" in source


@pytest.mark.parametrize("backend", ["gemv", "wgmma"])
def test_a_broadcast_tails_ops_round_as_torchs_do(tmp_path, backend):
    """Each op of a broadcast tail (after the row's value, over the output's own shape) rounds its
    result to the module's dtype, as each of torch's 16-bit ops returns it (the identity in an fp32
    build); the backward's recomputation of the same values does not (it runs in fp32 builds)."""
    from kgen.tune.spec import Tile

    path = tmp_path / "tail.py"
    path.write_text(RESIDUAL_MEAN.replace("return F.gelu(y) + residual", "return torch.sigmoid(F.gelu(y) + residual) * residual"))
    spec = (gemv_spec(str(path), 64, 96, 96) if backend == "gemv" else
            Spec.of(str(path), 64, 96, 96, math="tf32x3", backend="wgmma", fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4)))
    source = generator.render_cuda_source(spec)
    tail = source[source.index("struct Tail {"):]
    tail = tail[:tail.index("\n};")]
    ops = [line for line in tail.splitlines() if re.match(r"\s*const float v\d+ = ", line) and "p.operand" not in line
           and "t[" not in line]
    assert len(ops) == 3 and all("kgen::rounded_to_module<kgen_operand_t>(" in line for line in ops), ops
    if "struct TailBackward {" in source:
        back = source[source.index("struct TailBackward {"):]
        assert "rounded_to_module" not in back[:back.index("\n};")]


def upcast_ref(folder: Path) -> str:
    """RESIDUAL_MEAN with the mean taken of the upcast value and cast back (a 16-bit module's
    `y.float().mean(...).to(x.dtype)`)."""
    path = folder / "upcast_mean.py"
    path.write_text(RESIDUAL_MEAN.replace("y = y.mean(-1, keepdim=True)", "y = y.float().mean(-1, keepdim=True).to(x.dtype)"))
    return str(path)


def test_an_upcast_inside_the_reduced_chain_keeps_the_rewrite(tmp_path):
    """`y.float().mean(...)`: the upcast is no step of the affine chain (it changes no value), so
    the row's mean is still a matrix-vector product, and the file runs 16-bit modules."""
    from kgen.frontend.problems import graph
    from kgen.ir.rewrite import row_sum_of_gemm, simplify

    ref = upcast_ref(tmp_path)
    g = simplify(graph(ref, 64, 96, 96))[0]
    assert any(n.op == "to_float32" for n in g.live())
    row_sum = row_sum_of_gemm(g)
    assert row_sum is not None and row_sum.reduce.op == "mean"
    assert [n.op for n in row_sum.steps] == ["add", "sub"]   # the bias, the shift
    spec = gemv_spec(ref, 64, 96, 96)
    assert generator.sixteen_bit_builds(spec)
    assert "_KGEN_OPERAND_BUILDS = {torch.float32: None, torch.bfloat16:" in generator.render(spec)


@pytest.mark.parametrize("pooled", ["z", "z.float()"])
def test_a_pooling_of_the_gemm_output_beside_the_row_sum_blocks_the_rewrite(tmp_path, pooled):
    """The row sum of z beside a max pooling of z (or of its upcast, no step of the reduced chain
    but a value of width N all the same): the rewrite forms no z, so it does not apply (it did,
    and the lowering failed an assertion; for the upcast it was taken since the upcast was
    passed by wherever it was)."""
    from kgen.frontend.problems import graph
    from kgen.ir.rewrite import row_sum_of_gemm, simplify

    path = tmp_path / f"pooled_{len(pooled)}.py"
    path.write_text(RESIDUAL_MEAN.replace(
        "y = y.mean(-1, keepdim=True)\n        y = torch.logsumexp(y, 1, keepdim=True)\n        return F.gelu(y) + residual",
        f"return y.sum(1, keepdim=True) + F.max_pool1d({pooled.replace('z', 'y')}.unsqueeze(1), 4).squeeze(1)"))
    g = simplify(graph(str(path), 64, 96, 96))[0]
    assert any(n.kind == "pool" for n in g.live())
    assert row_sum_of_gemm(g) is None


def test_a_gemv_module_that_casts_to_float32_runs_fp32_only(tmp_path):
    path = tmp_path / "cast.py"
    # (the cast after the mean, its output left in float32: a float32 fact)
    path.write_text(RESIDUAL_MEAN.replace("y = y.mean(-1, keepdim=True)", "y = y.mean(-1, keepdim=True).float()"))
    spec = gemv_spec(str(path), 64, 96, 96)
    assert not generator.sixteen_bit_builds(spec)
    assert "casts to float32 in its forward" in generator.fp32_only_reason(spec)
    assert "_KGEN_OPERAND_BUILDS = {torch.float32: None}" in generator.render(spec)


def test_a_16_bit_search_tries_the_rewrite_once():
    """half_variants keeps one gemv variant (its 16-bit build has no tile), and no fusion-0 copy
    of it (fusion 0 moves a GEMM epilogue's chain; the rewrite has no GEMM)."""
    workload = Workload(SUM_ROWS, 1024, 8192, 8192)
    variants = enumerate_variants(workload, ["tf32x3", "tf32"], arch="sm_90a")
    kept = half_variants(workload, variants)
    gemv = [v for v in kept if v.backend == "gemv"]
    assert len(gemv) == 1 and gemv[0].fusion == 1
    assert any(v.backend == "wgmma" for v in kept)


# ---- nvcc: each build, its kernels instantiated for the dtype ---------------------------------
BUILD_CASES = [("sum_rows", dtype) for dtype in OPERANDS] + [("residual_mean", "bf16")]


def build_source(case: str, folder: Path) -> str:
    ref = SUM_ROWS if case == "sum_rows" else residual_ref(folder)
    return generator.render_cuda_source(gemv_spec(ref, 64, 96, 96))


def build_targets(dtype: str) -> tuple:
    # (bf16 also for sm_80: the rewrite's 16-bit build is not Hopper's alone)
    arch = (SM80, SM90A) if dtype == "bf16" else (SM90A,)
    return (*arch, f"-DKGEN_OPERAND={OPERANDS[dtype]}")


@nvcc_prefetch(lambda p: [report_job(build_source(p["case"], prefetch_dir("gemv_half", p)), build_targets(p["dtype"]))])
@pytest.mark.parametrize("case, dtype", BUILD_CASES)
def test_the_builds_compile_with_their_kernels_for_the_dtype(case, dtype):
    """A forward declaration that no longer matched the kernels once left an fp32 build with no
    gemv kernel at all (it compiled; the library would not have loaded): each build's report
    must name the rewrite's kernels that read x or w, or write dx and dW (its backward's),
    instantiated for its dtype."""
    import nvcc_jobs

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    source = build_source(case, prefetch_dir("gemv_half", {"case": case, "dtype": dtype}))
    returncode, report = nvcc_jobs.result(report_job(source, build_targets(dtype)))
    assert returncode == 0, report[-4000:]
    assert spills(report) == [], "\n".join(spills(report))
    kernels = set(re.findall(r"Compiling entry function '(\w+)'", report))
    t = MANGLED[OPERANDS[dtype]]
    # (weighted_column_sum_kernel: W's in the forward, x's weighted by dR in the backward; the
    # backward's outer products write dx and dW in the module's dtype too)
    typed = [("weighted_column_sum_kernel", f"E{t}Li"), ("gemv_rows_kernel", f"GemvRowsE{t}E"),
             ("outer_product_kernel", f"E{t}EEv")]
    if case == "residual_mean":   # the broadcast tail writes the output in the module's dtype
        typed.append(("tail_kernel", f"TailE{t}E"))
    for name, typed_as in typed:
        named = [k for k in kernels if name in k]
        assert named and all(typed_as in k for k in named), (name, sorted(kernels))
    assert any("RowWeights" in k for k in kernels) and any("gemv_row_grad_kernel" in k for k in kernels)


# ---- GPU tier ----------------------------------------------------------------------------------
# (M, K, N): K of whole 16-byte rows of 16-bit values (8 a load), and an odd K (one a load).
SHAPES = {"K=528": (257, 528, 296), "K=301": (65, 301, 200)}


@pytest.fixture(scope="module")
def gemv_files(tmp_path_factory):
    from kgen.tune.search import Candidate, build_all

    if not torch.cuda.is_available():
        return {}
    d = tmp_path_factory.mktemp("gemv_half")
    refs = {"sum_rows": SUM_ROWS, "residual_mean": residual_ref(d), "upcast_mean": upcast_ref(d)}
    candidates = [Candidate(s, generator.write(s, d / f"{s.name()}.py"))
                  for s in (gemv_spec(ref, *shape) for ref in refs.values() for shape in SHAPES.values())]
    for dtype in HALF:
        build_all(candidates, 16, 600, lambda line: None, dtype=dtype)
    return {(name, shape): next(c.path for c in candidates if c.spec.problem == ref
                                and (c.spec.batch, c.spec.in_features, c.spec.out_features) == SHAPES[shape])
            for name, ref in refs.items() for shape in SHAPES}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", ["sum_rows", "residual_mean", "upcast_mean"])
def test_the_16_bit_rewrite_is_at_least_as_near_fp64_as_eager(gemv_files, case, shape, dtype):
    """The output in the module's dtype, nearer the fp64 result of the rounded module than eager
    in that dtype, or as near (one rounding step of the dtype at the output's scale: both round
    their last op); two calls, so a cached build and workspace are used too."""
    from kgen.check.loading import EmittedFile

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    f = EmittedFile(gemv_files[(case, shape)])
    new, eager, exact = trio(f, HALF[dtype])
    for call in range(2):
        x = torch.rand(f.spec.batch, f.spec.in_features, device="cuda").to(HALF[dtype])
        with torch.no_grad():
            want, got, ref64 = eager(x), new(x), exact(x.double())
        assert got.dtype == want.dtype and got.shape == want.shape
        assert bool(torch.isfinite(got).all())
        err_new, err_eager = max_err(got, ref64), max_err(want, ref64)
        step = torch.finfo(HALF[dtype]).eps * ref64.abs().max().item()
        assert err_new <= err_eager + step, f"call {call}: {err_new:.3e} vs fp64, eager {dtype} {err_eager:.3e}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF)
def test_the_full_gate_passes_the_16_bit_rewrite(gemv_files, dtype):
    """kgen validate --dtype on KernelBench 51's kind of module (odd K): every check, KernelBench's
    eval at its precision among them (the row's mean moves eager's rounding of z far below 1e-2)."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import validate

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    results = validate(EmittedFile(gemv_files[("residual_mean", "K=301")]), tol=1e-2, dtype=HALF[dtype])
    for r in results:
        print(r.line())
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF)
def test_the_16_bit_rewrite_under_torch_compile_and_a_cuda_graph(gemv_files, dtype):
    """The rewrite's custom op (its fake kernel gives the output's shape and x's dtype) traces
    under torch.compile(fullgraph=True) and replays in a CUDA graph: the output bit for bit eager
    ModelNew's, its broadcast tail written in the module's dtype."""
    from kgen.check.loading import EmittedFile

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    f = EmittedFile(gemv_files[("residual_mean", "K=528")])
    torch.manual_seed(0)
    model = f.ModelNew(*f.init_args()).cuda().to(HALF[dtype])
    x = torch.rand(f.spec.batch, f.spec.in_features, device="cuda").to(HALF[dtype])
    with torch.no_grad():
        expect = model(x)
        got = torch.compile(model, fullgraph=True)(x)
        assert got.dtype == expect.dtype == HALF[dtype]
        assert torch.equal(got, expect)
        static_x = x.clone()
        model(static_x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_x)
        static_x.copy_(torch.rand_like(x))
        graph.replay()
        assert torch.equal(static_out, model(static_x))
