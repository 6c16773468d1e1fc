"""Session 61's probe of 16-bit semantics holes (CPU): what torch's CUDA kernels do with a bf16 /
fp16 module's numbers, reductions, casts and addmm, against what kgen's IR oracle
(Graph.interpret) and its emitted CUDA compute. Where CPU eager and CUDA agree the oracle is
checked against eager on the CPU; where they differ, against an emulation of the CUDA kernel
written here from torch's source (cited at each test).

Found and fixed:
- (WRONG in the kernels) a comparison with a Python number (`y > 0.1`, `torch.where(y > t, ...)`,
  `y.gt(0.1)`, masks `y * (y > t)`, masked_fill(y < t, ...), F.threshold) compared a 16-bit y with
  the number in fp32, where torch's CUDA kernels compare with the number rounded to y's dtype
  (CompareKernels.cu: iter.scalar_value<scalar_t>(); threshold_kernel_cuda: threshold.to<scalar_t>()):
  at y = bf16(0.1) = 0.10009765625, `y > 0.1` was true in kgen's kernels and false in eager. The
  oracle was right (it compares in the tensor's dtype). Now a 16-bit build's CUDA rounds the number
  (ops.NUMBER_OPERANDS_IN_TENSOR_DTYPE), not where the compared value is fp32 (an upcast's).
  clamp / hardtanh / clamp_min with a number (clamp_scalar_kernel_impl: min.to<scalar_t>()) need
  nothing: rounding is monotonic, so their rounded result is the same (checked below).
- (WRONG, oracle and kernels) torch.addmm(b, x, W.t(), beta=, alpha=): cuBLAS computes
  alpha * acc + beta * b in fp32 (Blas.cpp's addmm_out_cuda_impl passes alpha and beta as opmath_t to
  at::cuda::blas::gemm) and rounds once. The oracle rounded z, then alpha * z, then beta * b, then the
  sum (a step off on a quarter of the elements), and the kernels rounded beta * b first. Now the
  oracle follows the Linear's steps (graph.linear_steps, moved from lower.forward: the oracle's and
  the lowering's one definition) and beta * b is computed in torch's math type (to_opmath).
  (CPU eager differs for fp16: its cpublas gemm scales C by beta in fp16 first.)
- (REFUSED) torch.linalg.vector_norm / torch.norm / torch.linalg.norm with dtype=torch.float32
  ("norm with dtype or out"): now the norm of the value cast to float32, as softmax's and sum's
  dtype= are (cast back, taken in a 16-bit module; left float32, a float32 fact, as theirs).
- (WRONG dtype in another build) `.to(torch.bfloat16)` / `.type(torch.float16)` /
  `.to(dtype=torch.bfloat16)` in a module of that dtype was taken as a no-op, where `.bfloat16()`
  is refused: the file runs float32 modules too, where eager's cast converts (a bf16 output from an
  fp32 module, kgen's fp32). Now refused by the same rule and words as `.bfloat16()`; in a float32
  module the downcast mid-chain stays refused ("to a dtype other than the module's").

- (WRONG, oracle and kernels) y.sum() / y.mean() of everything (Graph.output_tail: the kernels'
  rows' sums, then torch's own sum of them): each row's sum was rounded to the 16-bit dtype first,
  where torch's reduction accumulates every element in fp32 and rounds once (CUDA's reduce_kernel
  with acc_t float; CPU alike): rows summing to 1001 and -1000 in turn gave 0 in bf16, eager 32.
  Now the rows' sums stay fp32 (a to_opmath value; the kernels write them in fp32,
  kgen_cfg::kFp32Value, _KGEN_FP32_VALUE_OUTPUT) and the tail's result is rounded once
  (Graph.tail_rounds). y.sum(1).sum() and y.amax() are left as they were (eager rounds the rows
  too; max is monotonic).

Checked and right (no change): y.softmax / sum / mean(-1, dtype=torch.float32) cast back; the
Llama RMSNorm `self.weight * h.to(input_dtype)`; clamp / hardtanh / threshold's value.

Left: T5LayerNorm's `if self.weight.dtype in [torch.float16, torch.bfloat16]: h = h.to(self.weight.dtype)`
stays refused ("a branch on a traced value ... its values or dtype"): one trace serves the file's
fp32, bf16 and fp16 builds, and a branch on the dtype takes another path in each (here taking it is
right in all three, a cast to the module's dtype being a no-op in fp32, but not for every such
branch); torch.add(y, z, alpha=a) / addcmul still round a * z first (eager once, session 60's).
"""

import copy
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir import ops
from kgen.ir.graph import Unsupported

from conftest import nvcc_prefetch, prefetch_dir, reference_text
from nvcc_jobs import NVCC, SM90A, report_job
from test_spellings_probe60_users import check_taken

HALF = [torch.bfloat16, torch.float16]
LIN = "self.fc = nn.Linear(in_features, out_features)"


def ref(tmp_path, body: list[str], init=(), name="ref", built: str | None = None) -> Reference:
    """A module whose forward runs `body` (its last line sets x) after `y = self.fc(x)`; `built`
    ("bfloat16", ...): the module built in that dtype, its input in it."""
    path = tmp_path / f"{name}.py"
    init = [LIN, *init] + ([f"self.to(torch.{built})"] if built else [])
    path.write_text(reference_text(init, ["y = self.fc(x)", *body], 24, built))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Reference(path)


def identity_model(r: Reference, dt: torch.dtype):
    """r's model in dt with the Linear the identity on the first 16 features, so that y is x."""
    model = r.Model(*r.init_args()).to(dt)
    with torch.no_grad():
        model.fc.weight.copy_(torch.eye(24, 16))
        model.fc.bias.zero_()
    return model


def next_up(t: torch.Tensor, step: int = 1) -> torch.Tensor:
    """The 16-bit values `step` units in the last place from t's (away from 0 for step 1)."""
    return (t.view(torch.int16) + step).view(t.dtype)


# ---- 1. comparisons with a number ----------------------------------------------------------------
COMPARISONS = {
    "mask": "x = y * (y > 0.1)",
    "gt_method": "x = y * y.gt(0.1)",
    "where": "x = torch.where(y >= 0.3, y, 0.0)",
    "number_left": "x = y.masked_fill(0.7 < y, -1.0)",
    "threshold": "x = F.threshold(y, 0.1, -2.0)",
    "eq": "x = torch.where(y == 0.3, 5.0, y)",
}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_a_comparison_with_a_number_compares_in_the_tensors_dtype(name, dt, tmp_path):
    """At y equal to the number rounded to the dtype (bf16(0.1) = 0.10009765625 > 0.1), eager's
    comparison is with that rounded number: CUDA's compare_kernel_with_scalars reads the number as
    iter.scalar_value<scalar_t>() and threshold_kernel_cuda as threshold.to<scalar_t>(), as CPU
    eager does. The oracle agrees with eager there (and with the emulation, the number rounded
    first); the kernels' expression is checked below."""
    r = ref(tmp_path, [COMPARISONS[name]])
    graph = trace(r)
    numbers = torch.tensor([0.1, 0.3, 0.7], dtype=dt)   # (each rounded to dt)
    x = torch.cat([numbers, next_up(numbers), torch.linspace(-1, 1, 10).to(dt)]).repeat(8, 1)
    model = identity_model(r, dt)
    with torch.no_grad():
        eager, got = model(x), graph.interpret(x, copy.deepcopy(model))
        y = model.fc(x).float()
    if name == "threshold":
        # (CPU eager's threshold compares in float with float(0.1); CUDA's with threshold.to<scalar_t>())
        torch.testing.assert_close(got, torch.where(y <= numbers[0].float(), -2.0, y).to(dt), rtol=0, atol=0)
        assert not torch.equal(got, eager) if dt == torch.bfloat16 else True
        return
    assert torch.equal(got, eager), (got[0], eager[0])
    if name == "mask":   # (the emulation of CUDA's kernel: y > bf16(0.1) in float)
        y = model.fc(x).float()
        torch.testing.assert_close(got, (y * (y > numbers[0].float())).to(dt), rtol=0, atol=0)
        if dt == torch.bfloat16:   # (in fp32 0.10009765625 > 0.1: the old kernels' answer)
            assert got[0, 0] == 0 and (y[0, 0] > 0.1).item()


def comparisons_source(folder: Path) -> str:
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    path = folder / "comparisons.py"
    path.write_text(reference_text(
        ["self.w = nn.Parameter(torch.randn(128, in_features) / 8)", "self.b = nn.Parameter(torch.randn(128))"],
        ["y = torch.addmm(self.b, x, self.w.t(), beta=0.3, alpha=0.7)",
         "h = y * (y > 0.1) + F.threshold(y, 0.3, 0.0) + y.masked_fill(0.7 >= y, 0.5)",
         "h = h + torch.where(y.float() < 0.9, y.float(), 0.0).to(y.dtype) + torch.where(y == 0.2, y.float(), 0.0).to(y.dtype)",
         "x = h / torch.linalg.vector_norm(h, dim=-1, keepdim=True, dtype=torch.float32).to(h.dtype)"], 128))
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return generator.render_cuda_source(spec)


def test_a_16_bit_builds_comparison_rounds_its_number_to_the_modules_dtype(tmp_path):
    """The CUDA a 16-bit build compiles compares a value of the module's dtype with the number
    rounded to it (kgen::rounded_to_module: the identity in an fp32 build), a number on either
    side; a comparison of an upcast (fp32) value with the number itself, as torch compares fp32
    values; y == 0.2 in y's dtype though the where's result is fp32. The backward's recomputation
    (module_rounding off: it rounds nothing) compares y rounded with the number rounded, as the
    forward does (session 62: derivatives.COMPARED_AS_HELD; both unrounded before).
    Before: every comparison with the fp32 number."""
    source = comparisons_source(tmp_path)
    rounded = "kgen::rounded_to_module<kgen_operand_t>({})".format
    assert has(source, f"((V) > ({rounded('0.100000001f')}) ? (1.0f) : (0.0f))")
    assert has(source, f"((V) <= ({rounded('0.300000012f')}) ? (0.0f) : (V))")
    assert has(source, f"((V) <= ({rounded('0.699999988f')}) ? (0.5f) : (V))")   # (0.7 >= y)
    assert has(source, f"((V) == ({rounded('0.200000003f')}) ? (V) : (0.0f))")
    assert has(source, "((V) < (0.899999976f) ? (V) : (0.0f))") and rounded("0.899999976f") not in source
    assert has(source, f"((({rounded('V')}) <= ({rounded('0.300000012f')}))) ? (0.0f) : (D))")   # (the backward's)


def has(source: str, expr: str) -> bool:
    """Whether the CUDA source holds `expr`, V standing for any value's name (v12, ...), D for any
    gradient's (d12, ...)."""
    return re.search(re.escape(expr).replace("V", r"v\d+").replace("D", r"d\d+"), source) is not None


@nvcc_prefetch(lambda p: [report_job(comparisons_source(prefetch_dir("probe61_half", p)),
                                     (SM90A, f"-DKGEN_OPERAND={p['operand']}"))])
@pytest.mark.parametrize("operand", ["__nv_bfloat16", "__half"])
def test_the_16_bit_builds_of_this_sessions_fixes_compile(operand):
    """The rounded comparison numbers, addmm's fp32 beta * b and a float32 vector_norm, in the
    bf16 and fp16 builds: nvcc compiles them, nothing spills."""
    import nvcc_jobs

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    source = comparisons_source(prefetch_dir("probe61_half", {"operand": operand}))
    returncode, report = nvcc_jobs.result(report_job(source, (SM90A, f"-DKGEN_OPERAND={operand}")))
    assert returncode == 0, report[-4000:]
    assert "bytes spill stores" not in report or all(
        " 0 bytes spill stores" in line for line in report.splitlines() if "spill stores" in line), report[-4000:]


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("body", ["x = torch.clamp(y, -0.1, 0.1)", "x = F.hardtanh(y, -0.3, 0.7)",
                                  "x = torch.clamp_min(y, 0.1)", "x = y.clamp(max=0.3)"])
def test_a_clamp_by_a_number_needs_no_rounding_of_it(body, dt, tmp_path):
    """torch's CUDA clamp takes its bounds in the tensor's dtype (clamp_scalar_kernel_impl:
    min.to<scalar_t>()), kgen's kernels in fp32 and round the result: the same value, as
    rounding is monotonic (min(y, bf16(c)) = bf16(min(y, c)) for a bf16 y). Checked at y on and
    next to the bounds, against the emulation."""
    r = ref(tmp_path, [body])
    graph = trace(r)
    bounds = torch.tensor([-0.3, -0.1, 0.1, 0.3, 0.7], dtype=dt)
    x = torch.cat([bounds, next_up(bounds), next_up(bounds, -1), torch.zeros(1, dtype=dt)]).repeat(8, 1)
    model = identity_model(r, dt)
    with torch.no_grad():
        y = model.fc(x)
        eager, got = model(x), graph.interpret(x, copy.deepcopy(model))
    assert torch.equal(got, eager)
    (clamp,) = [n for n in graph.live() if n.op in ("clamp", "hardtanh", "maximum_const", "minimum_const")]
    kernels = ops.torch_apply(clamp.op, [y.float()], clamp.attrs).to(dt)   # (fp32 bounds, rounded after)
    assert torch.equal(kernels, got)


# ---- 6. torch.addmm's alpha and beta ---------------------------------------------------------------
ADDMM = {"alpha_beta": (0.7, 0.3), "alpha": (0.7, 1.0), "beta": (1.0, 0.3), "powers_of_two": (2.0, 0.5)}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(ADDMM))
def test_addmm_rounds_once_after_alpha_and_beta(name, dt, tmp_path):
    """torch.addmm(b, x, W.t(), beta=, alpha=) of 16-bit tensors on CUDA: cuBLAS's gemm with alpha
    and beta as opmath_t (float; ATen's addmm_out_cuda_impl, at::cuda::blas::gemm), result = alpha
    * acc + beta * b in fp32, rounded once (the cublasLt path for beta = 1 adds the bias in its
    epilogue, also in fp32). The oracle against that emulation, bit for bit, and in bf16 against
    CPU eager (whose fp16 gemm scales b by beta in fp16 first: the CUDA emulation is the judge).
    Before: a quarter of the elements a step off (z, alpha z, beta b each rounded)."""
    alpha, beta = ADDMM[name]
    path = tmp_path / "addmm.py"
    path.write_text(reference_text(
        ["self.w = nn.Parameter(torch.randn(24, in_features) / 4)", "self.b = nn.Parameter(torch.randn(24))"],
        [f"x = torch.addmm(self.b, x, self.w.t(), beta={beta}, alpha={alpha})"], 24))
    r = Reference(path)
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).to(dt)
    torch.manual_seed(1)
    x = (torch.randn(512, 16) * 3).to(dt)
    with torch.no_grad():
        got = graph.interpret(x, copy.deepcopy(model))
        cuda = (alpha * F.linear(x.float(), model.w.float()) + beta * model.b.float()).to(dt)
        assert torch.equal(got, cuda), (got != cuda).sum()
        if beta in (1.0, 0.5):   # (CPU eager rounds beta * b to the dtype first: equal where it is exact)
            assert torch.equal(got, model(x)) or dt == torch.float16
    check_taken(r, graph)


def test_addmm_beta_times_b_is_no_rounded_value_in_the_kernels(tmp_path):
    """beta * b is a to_opmath value (fp32, not rounded to the module's dtype by a 16-bit build),
    alpha * z is inside the Linear, and the sum is the Linear's output, rounded once."""
    source = comparisons_source(tmp_path)
    assert has(source, "const float V = ((z) * (0.699999988f));")
    assert has(source, "const float V = ((V) * (0.300000012f));")
    assert not has(source, "kgen::rounded_to_module<kgen_operand_t>(((V) * (0.300000012f)))")
    assert has(source, "const float V = kgen::rounded_to_module<kgen_operand_t>(((V) + (V)));")


# ---- 3. a norm with dtype=torch.float32 ----------------------------------------------------------
NORMS = {
    "vector_norm": "torch.linalg.vector_norm(y, dim=-1, keepdim=True, dtype=torch.float32)",
    "norm": "torch.norm(y, dim=-1, keepdim=True, dtype=torch.float32)",
    "linalg_norm": "torch.linalg.norm(y, dim=-1, keepdim=True, dtype=torch.float32)",
    "l1": "torch.linalg.vector_norm(y, 1, dim=-1, keepdim=True, dtype=torch.float32)",
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_a_norm_with_dtype_float32_is_the_norm_of_the_value_in_float32(name, tmp_path):
    """torch's linalg_vector_norm casts its input to dtype and computes and returns the norm in it.
    Before: refused ("norm with dtype or out"). Now the norm of the value upcast (to_float32),
    taken where the forward casts back, as softmax(dtype=torch.float32) is: against eager in
    float32, and in bf16 / fp16 (where fp16's y^2 would overflow from |y| > 256)."""
    r = ref(tmp_path, [f"x = y / {NORMS[name]}.to(y.dtype)"])
    graph = trace(r)
    assert not graph.fp32_casts and any(n.op == "to_float32" for n in graph.live())
    # (in float32: torch refuses an fp64 input narrowed to dtype=torch.float32, so no fp64 check)
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    x = torch.randn(64, 16)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), model(x), rtol=1e-6, atol=1e-7)
    for dt in HALF:   # (converted, and built in the 16-bit dtype: the IR against eager at |y| ~ 300)
        built = trace(ref(tmp_path, [f"x = y / {NORMS[name]}.to(y.dtype)"], name="built", built=str(dt)[6:]))
        torch.manual_seed(0)
        model = r.Model(*r.init_args()).to(dt)
        torch.manual_seed(1)
        x = (torch.randn(64, 16) * 300).to(dt)
        with torch.no_grad():
            eager = model(x)
            for ir in (graph, built):
                got = ir.interpret(x, copy.deepcopy(model))
                assert got.dtype == dt and eager.isfinite().all()
                torch.testing.assert_close(got, eager, rtol=torch.finfo(dt).eps, atol=0)


def test_a_norm_left_in_float32_or_of_another_dtype(tmp_path):
    """Left float32: a float32 fact in a float32 module (the file runs float32 modules), refused in
    a 16-bit one (its output float32), as softmax(dtype=torch.float32) is; dtype=float64 and out=
    refused by name."""
    body = "x = torch.linalg.vector_norm(y, dim=-1, dtype=torch.float32)"
    assert len(trace(ref(tmp_path, [body])).fp32_casts) == 1
    with pytest.raises(Unsupported, match=r"a cast to float32 in a torch\.bfloat16 module .*its output is torch\.float32"):
        trace(ref(tmp_path, [body], name="bf16", built="bfloat16"))
    with pytest.raises(Unsupported, match=r"norm with dtype=torch\.float64 on a torch\.float32 module"):
        trace(ref(tmp_path, ["x = torch.norm(y, dim=-1, dtype=torch.float64).float()"], name="f64"))
    assert not trace(ref(tmp_path, ["x = y / torch.norm(y, dim=-1, keepdim=True, dtype=y.dtype)"], name="own")).fp32_casts


# ---- 5. a cast naming a 16-bit dtype -------------------------------------------------------------
@pytest.mark.parametrize("built, cast", [("bfloat16", "y.to(torch.bfloat16)"), ("float16", "y.type(torch.float16)"),
                                         ("bfloat16", "y.to(dtype=torch.bfloat16)"), ("bfloat16", "y.bfloat16()"),
                                         ("float16", "y.half()")])
def test_a_cast_naming_the_modules_16_bit_dtype_is_refused_by_one_rule(built, cast, tmp_path):
    """In a module of that dtype the cast is a no-op, but kgen's file runs float32 modules too, where
    eager's converts: the module converted to float32 hands a 16-bit output (kgen's would be
    float32). Before: .to(torch.bfloat16) was taken as the no-op, .bfloat16() refused; now both
    refused with one message, which says what to write."""
    r = ref(tmp_path, [f"x = torch.relu({cast}) * 3"], built=built)
    with torch.no_grad():
        assert r.Model(*r.init_args()).float()(torch.rand(4, 16)).dtype == getattr(torch, built)
    method = cast.split(".")[1].split("(")[0]
    with pytest.raises(Unsupported, match=rf"\.{method}\(\) in a torch\.{built} module: a cast that names the "
                                          r"module's dtype.*write \.to\(x\.dtype\)"):
        trace(r)
    assert not trace(ref(tmp_path, ["x = torch.relu(y.to(y.dtype)) * 3"], name="own", built=built)).fp32_casts


@pytest.mark.parametrize("cast", ["y.to(torch.bfloat16)", "y.bfloat16()", "y.half()"])
def test_a_downcast_in_a_float32_module_is_refused(cast, tmp_path):
    """In a float32 module a 16-bit cast mid-chain makes eager's output 16-bit (a float32 module
    whose ops after it run in bf16): kgen's output is the module's dtype, so refused, saying so."""
    with pytest.raises(Unsupported, match=r"to a dtype other than the module's \(torch\.float32, its input's\)"):
        trace(ref(tmp_path, [f"x = {cast} * 3"]))


def test_llamas_rms_norm_casts_back_as_eager(tmp_path):
    """Llama's RMSNorm: `self.weight * h.to(input_dtype)`, the weight of the module's dtype:
    eager's values bit for bit in bf16 and fp16 (checked, no change)."""
    body = ["input_dtype = y.dtype", "h = y.to(torch.float32)", "variance = h.pow(2).mean(-1, keepdim=True)",
            "h = h * torch.rsqrt(variance + 1e-6)", "x = self.weight * h.to(input_dtype)"]
    r = ref(tmp_path, body, init=["self.weight = nn.Parameter(torch.rand(out_features) + 0.5)"])
    graph = trace(r)
    for dt in HALF:
        torch.manual_seed(0)
        model = r.Model(*r.init_args()).to(dt)
        torch.manual_seed(1)
        x = (torch.randn(64, 16) * 300).to(dt)
        with torch.no_grad():
            assert torch.equal(graph.interpret(x, copy.deepcopy(model)), model(x))


# ---- 2. a sum / mean of everything -----------------------------------------------------------------
def cancelling_rows(dt: torch.dtype, rows: int = 64) -> torch.Tensor:
    """(rows, 16) values of dt whose rows' sums are 1001 and -1000 in turn: each rounds to +-1000 in
    bf16 (fp16: +-1001 and -1000, exact), so rounding each row first sums to 0 in bf16, where
    torch's one rounding of the fp32 total gives rows / 2."""
    x = torch.zeros(rows, 16)
    x[0::2, 0], x[0::2, 1], x[1::2, 0] = 1000.0, 1.0, -1000.0
    return x.to(dt)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_a_sum_of_everything_rounds_once(kind, dt, tmp_path):
    """y.sum() / y.mean() with no dim: torch's reduction accumulates every element of a 16-bit y in
    float32 and rounds once (CUDA's reduce_kernel with acc_t float, MeanOps' sum * (1 / numel); CPU
    eager alike). kgen computes each row's sum in its kernels and torch's own op sums them
    (Graph.output_tail): before, each row's sum was rounded to the dtype first, 0 where eager
    gives 32 in bf16. Now the rows' sums stay fp32 (a to_opmath value) and the tail's result is
    rounded once (Graph.tail_rounds)."""
    r = ref(tmp_path, [f"x = y.{kind}()"])
    graph = trace(r)
    model = identity_model(r, dt)
    x = cancelling_rows(dt)
    with torch.no_grad():
        eager, got = model(x), graph.interpret(x, copy.deepcopy(model))
        exact = copy.deepcopy(model).double()(x.double())
        per_row = getattr(model.fc(x).to(dt).sum(1) if kind == "sum" else model.fc(x).mean(1), kind)()
    assert got.dtype == eager.dtype == dt and torch.equal(got, eager), (got, eager)
    assert torch.equal(got, exact.to(dt))
    if dt == torch.bfloat16:   # (the old answer: each row's rounded first)
        assert per_row.item() == 0 and got.item() != 0
    assert graph.tail_rounds and graph.node(graph.output).fp32
    for other in ("y.sum(1).sum()", "y.amax()"):   # (rounded per row by eager too; max: monotonic)
        assert not trace(ref(tmp_path, [f"x = {other}"], name="other")).tail_rounds


def sum_everything_source(folder: Path, backend: str = "wgmma") -> str:
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    path = folder / "sum_everything.py"
    path.write_text(reference_text([LIN], ["x = self.fc(x).sum()"], 128))
    if backend == "gemv":
        return generator.render_cuda_source(Spec.of(str(path), 64, 96, 128, math="fp32_simt", backend="gemv", fusion=1))
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend=backend, fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return generator.render_cuda_source(spec)


def test_the_rows_sums_of_a_sum_of_everything_are_written_in_fp32(tmp_path):
    """The kernels write the rows' sums unrounded in fp32 (kgen_cfg::kFp32Value: forward.cuh's
    Output float in every build), the file hands them on in fp32 (_KGEN_FP32_VALUE_OUTPUT:
    _kgen_output_dtype) and rounds torch's sum of them once, to the module's dtype outside
    torch.autocast; y.amax() keeps the rounded rows (no flag)."""
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    source = sum_everything_source(tmp_path)
    assert "constexpr bool kFp32Value = true;" in source
    assert "dst[0] = kgen::OutputType<Out>::one(r4);" in source   # (Out: forward.cuh's Output, fp32 by kFp32Value)
    path = tmp_path / "sum_everything.py"
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    assert "_KGEN_FP32_VALUE_OUTPUT = True" in text
    assert "x.sum().to(x.dtype if autocast else weight0.dtype)" in text
    path = tmp_path / "max_everything.py"   # (a reference is traced once per path)
    path.write_text(reference_text([LIN], ["x = self.fc(x).amax()"], 128))
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    assert "_KGEN_FP32_VALUE_OUTPUT = False" in text and "x.amax()," in text and "kFp32Value = false" in text


@nvcc_prefetch(lambda p: [report_job(sum_everything_source(prefetch_dir("probe61_sum", p), p["backend"]),
                                     (SM90A, f"-DKGEN_OPERAND={p['operand']}"))])
@pytest.mark.parametrize("backend", ["wgmma", "gemv"])
@pytest.mark.parametrize("operand", ["__nv_bfloat16", "__half"])
def test_a_sum_of_everythings_16_bit_builds_compile(backend, operand):
    import nvcc_jobs

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    source = sum_everything_source(prefetch_dir("probe61_sum", {"backend": backend, "operand": operand}), backend)
    returncode, report = nvcc_jobs.result(report_job(source, (SM90A, f"-DKGEN_OPERAND={operand}")))
    assert returncode == 0, report[-4000:]
