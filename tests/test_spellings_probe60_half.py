"""Session 60's probe of how users bring 16-bit modules to kgen (CPU), generated: a Linear, then
numbers beside 16-bit values (y * 0.1, y / 3, 1 - y, y + 1e-5 and 1e-8 that fp16 cannot hold,
y * 1e5 that overflows fp16, 0-d tensors and buffers, full_like, where / masked_fill with numbers,
clamp), ops whose 16-bit semantics are special (//, div trunc, round, sign, comparisons times y,
softmax / log_softmax / sum with dtype=, var / std / norm / F.normalize / RMSNorm / logsumexp,
LayerNorm, BatchNorm), values torch makes float32 (a tensor of a dimension made in forward, a
bool .float(), where of two floats, softmax(dtype=float32) left so), autocast in forward; each
module traced float32 and run converted (model.to(bf16 / fp16), KernelBench's eval) and built in
a 16-bit dtype (self.to(dtype) at the end of __init__, its input in it). Taken: the IR's output
dtype eager's, its values against eager and fp64 (scales 1 and 100; the driver also 1000). The
driver (/tmp/p60) ran ~230 modules (also self.half() / set_default_dtype / nn.Parameter(dtype=)
in __init__, fp32 buffers and norms in a bf16-built module, cumulative ops, tensors made in
forward); this file runs a covering sample: 44 modules, 88 traced variants.

Tally of the sample, after the fixes: 74 taken and right, 14 refused rightly (9 by name, 5 float32
facts: eager's 16-bit output is float32 and the file runs float32 modules, saying why), 0 refused
wrongly, 0 wrong. Before them: 16 wrong.

Fixed:
- (WRONG, oracle) a Python number beside a 16-bit tensor was rounded to its dtype first
  (ops.torch_apply): `y * 1e5` of an fp16 y was inf everywhere (eager: finite where |y| < 0.65),
  `y * 0.1` was y times bf16(0.1). torch's CUDA add / sub / mul / div read the number in float32,
  as kgen's kernels do (ops.OPMATH_NUMBER). (CPU eager rounds an add's or sub's number first.)
- (WRONG, IR and kernels) torch.var / std / var_mean / std_mean, the 2-norm (norm, vector_norm,
  F.normalize) and RMSNorm were written with ops each rounded to the 16-bit dtype, where torch
  computes them in float32 and rounds once: in fp16 (y - mean)^2 and y^2 overflowed from |y| > 256
  (var inf; y / y.norm() 0; RMSNorm 0 from |y| > 256), in bf16 several steps off. Now a to_opmath
  node (Tracer._internal_upcast: Node.fp32 inside, to_module_dtype at the end; float64 stays
  float64 in the oracle). So is torch.div(y, c, rounding_mode='trunc'), whose CUDA kernel truncates
  the float32 quotient (rounded first, 18.96 was 19 in bf16).
- (WRONG output dtype) torch.tensor([0.5]) / torch.ones(1) made in forward was taken as its number;
  a tensor of a dimension promotes as a tensor, so eager's 16-bit output is float32. Now a float32
  fact in a float32 module, refused (saying so) in a 16-bit one.

- (WRONG in the kernels, fixed after the probe) kgen's fmod / remainder kernels divided by the
  number in float32 where torch's CUDA kernels round it to the 16-bit dtype first
  (gpu_kernel_with_scalars: y % 0.7 is y % 0.69921875 in bf16; the oracle is torch's). Now a
  16-bit build rounds the divisor (ops.DIVISOR_IN_TENSOR_DTYPE), but not an upcast value's.

Left (reported): a comparison with a number compares with it in float32 where
torch rounds it (differs only at y equal to the rounded number); x.sum() / x.mean() of everything
rounds each row's sum (eager rounds once); torch.add(y, z, alpha=a) / addcmul round a * z first
(eager once); torch.linalg.vector_norm(..., dtype=torch.float32) is refused by name; clamp /
masked_fill with bounds beyond fp16's range raise in eager too; a GroupNorm written out over a
view is exact where eager's fp16 var overflows (|y| ~ 1000); `.to(y.dtype)` of a float32 buffer
in a bf16-built module (session 58's).
"""

import copy
import warnings

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir import ops
from kgen.ir.graph import Unsupported

from conftest import reference_text

LIN = "self.fc = nn.Linear(in_features, out_features)"


def ref(tmp_path, body: list[str], init=(), name="ref") -> Reference:
    """A module whose forward runs `body` (its last line sets x) after `y = self.fc(x)`."""
    path = tmp_path / f"{name}.py"
    path.write_text(reference_text([LIN, *init], ["y = self.fc(x)", *body], out_features=24))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Reference(path)


# ---- fixes, each on its own --------------------------------------------------------------------
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op, number", [("mul", 1e5), ("div", 1e-5), ("mul", 0.1), ("add", 0.1), ("sub", 1e5)])
def test_a_number_meets_a_16_bit_tensor_in_float32(op, number, dt):
    """torch's CUDA add / sub / mul / div read a Python number in float32 for a 16-bit tensor and
    round the result once, as kgen's kernels do. Before: the oracle rounded the number to the
    tensor's dtype first, so `y * 1e5` of an fp16 y was inf everywhere (1e5 is no fp16 number),
    and `y * 0.1` was y times bf16(0.1), 1e-3 off."""
    torch.manual_seed(0)
    y = (torch.randn(4096) * 0.3).to(dt)
    got = ops.torch_apply(op, [y, number])
    want = getattr(torch, op)(y.float(), number).to(dt)
    assert got.dtype == dt and torch.equal(got, want)
    got = ops.torch_apply(op, [number, y])   # (the number on the left: 1 - y, 1 / y)
    want = getattr(torch, op)(torch.tensor(number), y.float()).to(dt)
    assert torch.equal(got, want)


def test_a_large_multiplier_of_an_fp16_module_is_finite_where_eager_is(tmp_path):
    """`y * 1e5` then `/ 1e5` in an fp16 module: eager's values, where the oracle's were inf and NaN."""
    r = ref(tmp_path, ["x = (y * 1e5) / 1e5"])
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).half()
    x = (torch.randn(8, 16) * 0.05).half()
    with torch.no_grad():
        eager, got = model(x), graph.interpret(x, copy.deepcopy(model))
    assert eager.isfinite().all()   # (|y| < 0.65: y * 1e5 is an fp16 number)
    torch.testing.assert_close(got, eager, rtol=1e-2, atol=1e-2)


# torch computes these reductions in float32 inside (its math type) on a 16-bit input and rounds
# once at the end; kgen writes them with several ops, each of which a 16-bit build rounded.
INTERNAL_FP32 = {
    "var": "x = y + y.var(-1, keepdim=True)",
    "std": "x = y / (y.std(-1, keepdim=True) + 1e-5)",
    "var_mean": "v, m = torch.var_mean(y, -1, keepdim=True)\nx = (y - m) / torch.sqrt(v + 1e-5)",
    "norm": "x = y / y.norm(dim=-1, keepdim=True)",
    "vector_norm": "x = y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)",
    "normalize": "x = F.normalize(y, dim=-1)",
    "rms_norm": "x = F.rms_norm(y, (24,), eps=1e-6)",
}


@pytest.mark.parametrize("name", sorted(INTERNAL_FP32))
def test_a_reduction_torch_computes_in_float32_is_rounded_once(name, tmp_path):
    """In an fp16 module at activations of a few hundred: before, (y - mean)^2 and y^2 overflowed
    fp16 (a variance of inf, y / y.norm() of 0, rms_norm's 0), where eager's are finite; in bf16
    the extra roundings were several steps off. Now the steps are fp32 (a to_opmath node, the
    result cast back once); in float64 the oracle is float64 throughout (torch's own var)."""
    r = ref(tmp_path, INTERNAL_FP32[name].splitlines())
    graph = trace(r)
    (up,) = [n for n in graph.live() if n.op == "to_opmath"]
    assert not graph.node(up.args[0]).fp32 and any(n.op == "to_module_dtype" for n in graph.live())
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    torch.manual_seed(1)
    x = torch.randn(8, 16) * 300
    with torch.no_grad():
        exact = model.double()(x.double())
        torch.testing.assert_close(graph.interpret(x.double(), copy.deepcopy(model)), exact, rtol=1e-12, atol=1e-12)
        model.half()
        eager, got = model(x.half()), graph.interpret(x.half(), copy.deepcopy(model))
    assert eager.isfinite().all() and got.dtype == torch.float16
    error = lambda t: (t.double() - exact).abs().max().item()   # noqa: E731
    assert error(got) <= 2 * error(eager) + 1e-3 * exact.abs().max().item(), (error(got), error(eager))



@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_trunc_division_by_a_number_truncates_the_float32_quotient(dt, tmp_path):
    """torch.div(y, 0.3, rounding_mode='trunc'): torch's CUDA kernel truncates y * (1 / 0.3) in
    float32. Before: the quotient rounded to the 16-bit dtype first (18.96 to 19 in bf16), a jump
    of 1 on a few % of the elements. By a tensor (or of a number by y) torch rounds the quotient
    of its two 16-bit values first, as the IR's two ops do: left so."""
    r = ref(tmp_path, ["x = torch.div(y, 0.3, rounding_mode='trunc')"])
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).to(dt)
    x = (torch.randn(256, 16) * 10).to(dt)
    with torch.no_grad():
        y = model.fc(x)
        torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), torch.trunc(y.float() / 0.3).to(dt),
                                   rtol=0, atol=0)
    kept = trace(ref(tmp_path, ["x = torch.div(2.0, y, rounding_mode='trunc')"], name="by_y"))
    assert not any(n.op == "to_opmath" for n in kept.live())


def test_a_one_element_float32_tensor_of_a_dimension_promotes(tmp_path):
    """`y * torch.tensor([0.5])` / `torch.ones(1)` made in forward: a tensor of a dimension takes part
    in type promotion, so eager's output in a 16-bit module is float32. Before: taken as the number,
    the output in the module's dtype. Now a float32 fact in a float32 module (the file runs float32
    modules, and says why for a 16-bit one), refused in a 16-bit one; a 0-d torch.tensor(0.5) is
    still the number (it promotes nothing)."""
    for body in ("x = y * torch.tensor([0.5])", "x = y + torch.ones(1)", "x = y * torch.ones(1, 1)"):
        r = ref(tmp_path, [body], name="p")
        m = r.Model(*r.init_args()).to(torch.bfloat16)
        with torch.no_grad():
            assert m(torch.rand(4, 16).to(torch.bfloat16)).dtype == torch.float32
        graph = trace(r)
        assert len(graph.fp32_casts) == 1 and "made in forward (a tensor of a dimension" in graph.fp32_casts[0][2]
    path = tmp_path / "bf16.py"
    path.write_text(reference_text(["self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)"],
                                   ["y = self.fc(x)", "x = y * torch.tensor([0.5])"], 24, "bfloat16"))
    with pytest.raises(Unsupported, match=r"a torch\.float32 tensor of shape \(1,\) made in forward in a "
                                          r"torch\.bfloat16 module: a tensor of a dimension takes part in type"):
        trace(Reference(path))
    assert not trace(ref(tmp_path, ["x = y * torch.tensor(0.5)"], name="zero_d")).fp32_casts


# ---- the generated probe: a covering sample ----------------------------------------------------
# name -> (init lines, forward body after `y = self.fc(x)`, expectation): "taken" (the IR's output
# in the module's dtype, its values against eager and fp64), "fp32" (a float32 fact: eager's 16-bit
# output is float32 and the file runs float32 modules, saying why), or a refusal's regex (in every
# module dtype, or {"fp32": ..., "16": ...} by the dtype the module is traced in).
SAMPLE = {
    # numbers beside 16-bit values (a number promotes nothing; torch's CUDA kernels read it in fp32)
    "mul_number": ([], "x = y * 0.1", "taken"),
    "div_int": ([], "x = y / 3", "taken"),
    "add_tiny": ([], "x = y + 1e-5", "taken"),
    "rsub": ([], "x = 1 - y", "taken"),
    "rdiv_eps": ([], "x = 1 / (y.abs() + 1e-8)", "taken"),
    "overflowing_multiplier": ([], "x = (y * 1e5) / 1e5", "taken"),
    "int_multiplier": ([], "x = y * 100000 // 7", "taken"),
    "tensor_0d": ([], "x = y * torch.tensor(0.5)", "taken"),
    "buffer_0d": (["self.register_buffer('c', torch.tensor(2.0))"], "x = y * self.c", "taken"),
    "param_0d": (["self.c = nn.Parameter(torch.tensor(0.1))"], "x = y * self.c", "taken"),
    "full_like": ([], "x = y * torch.full_like(y, 0.1)", "taken"),
    "where_number": ([], "x = torch.where(y > 0, y, 0.01 * y)", "taken"),
    "where_number_first": ([], "x = torch.where(y > 0, 0.5, y)", "taken"),
    "masked_fill_inf": ([], "x = torch.softmax(y.masked_fill(y < 0, float('-inf')), -1)", "taken"),
    "clamp": ([], "x = torch.clamp(y, -2.0, 2.0)", "taken"),
    # ops whose 16-bit semantics are special
    "floor_divide": ([], "x = y // 0.3", "taken"),
    "div_trunc": ([], "x = torch.div(y, 0.3, rounding_mode='trunc')", "taken"),
    "round": ([], "x = torch.round(y * 4) / 4", "taken"),
    "sign": ([], "x = torch.sign(y) * y", "taken"),
    "bool_times": ([], "x = (y > 0) * y", "taken"),
    "bool_to_dtype": ([], "x = (y > 0).to(y.dtype) * y", "taken"),
    "softmax": ([], "x = torch.softmax(y, -1)", "taken"),
    "softmax_dtype_back": ([], "x = torch.softmax(y, -1, dtype=torch.float32).to(y.dtype)", "taken"),
    "log_softmax_dtype_back": ([], "x = F.log_softmax(y, -1, dtype=torch.float32).type_as(y)", "taken"),
    "sum_dtype_back": ([], "x = y - y.sum(-1, keepdim=True, dtype=torch.float32).to(y.dtype) / 24", "taken"),
    "logsumexp": ([], "x = torch.logsumexp(y, -1, keepdim=True) + y", "taken"),
    **{f"internal_{k}": ([], v, "taken") for k, v in INTERNAL_FP32.items()},
    "rms_norm_module": (["self.rn = nn.RMSNorm(out_features)"], "x = self.rn(y)", "taken"),
    "std_mean": ([], "s, m = torch.std_mean(y, -1, keepdim=True)\nx = (y - m) / s", "taken"),
    "layer_norm": (["self.ln = nn.LayerNorm(out_features)"], "x = self.ln(y)", "taken"),
    "batch_norm": (["self.bn = nn.BatchNorm1d(out_features)"], "x = self.bn(y)", "taken"),
    # values torch makes float32 whatever the module's dtype
    "tensor_of_a_dimension": ([], "x = y * torch.tensor([0.5])",
                              {"fp32": "fp32", "16": r"a torch\.float32 tensor of shape \(1,\) made in forward"}),
    "bool_float": ([], "x = y + (y > 0).float()",
                   {"fp32": "fp32", "16": r"a cast to float32 in a torch\.\w+ module .*its output is torch\.float32"}),
    "where_two_floats": ([], "x = torch.where(y > 0, 1.0, 0.0) * y", "fp32"),
    "softmax_dtype_left": ([], "x = torch.softmax(y, -1, dtype=torch.float32)",
                           {"fp32": "fp32", "16": r"a cast to float32 in a torch\.\w+ module .*its output is torch\.float32"}),
    # refused, by name
    "cumsum": ([], "x = torch.cumsum(y, -1)", r"the function torch\.cumsum is not supported"),
    "autocast_region": ([], "with torch.autocast('cuda', dtype=torch.bfloat16):\n    x = torch.relu(y)",
                        r"torch\.autocast in forward"),
    "half_in_forward": ([], "x = torch.relu(y).half()", r"\.half\(\)"),
}
# module dtypes: (traced in, run in): "fp32>bf16" a float32 module converted (KernelBench's eval),
# "bf16" / "fp16" built so (self.to(dtype) at the end of __init__, its input in that dtype)
MODULE_DTYPES = {"fp32>bf16": (None, torch.bfloat16), "fp32>fp16": (None, torch.float16),
                 "bf16": (torch.bfloat16, torch.bfloat16), "fp16": (torch.float16, torch.float16)}


def sample_source(init, body, built) -> str:
    text = reference_text([LIN, *init] + ([f"self.to(torch.{str(built)[6:]})"] if built else []),
                          ["y = self.fc(x)", *body.splitlines()], 24, str(built)[6:] if built else None)
    return text


def sample_cases():
    """Every case traced float32 (and run converted to bf16 and fp16 from the one trace), and built
    in one 16-bit dtype, bf16 and fp16 in turn."""
    out = []
    for i, name in enumerate(SAMPLE):
        out.append((name, "fp32"))
        out.append((name, "bf16" if i % 2 else "fp16"))
    return out


@pytest.mark.parametrize("name, traced_as", sample_cases(), ids=[f"{n}-{d}" for n, d in sample_cases()])
def test_generated_16_bit_module(name, traced_as, tmp_path):
    init, body, expect = SAMPLE[name]
    built = None if traced_as == "fp32" else MODULE_DTYPES[traced_as][0]
    if isinstance(expect, dict):
        expect = expect["fp32" if built is None else "16"]
    path = tmp_path / "ref.py"
    path.write_text(sample_source(init, body, built))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = Reference(path)
        if expect not in ("taken", "fp32"):
            with pytest.raises(Unsupported, match=expect):
                trace(r)
            return
        graph = trace(r)
    runs = [torch.bfloat16, torch.float16] if built is None else [built]
    if expect == "fp32":
        assert graph.fp32_casts, graph.describe()
        for dt in runs:
            torch.manual_seed(0)
            with torch.no_grad():
                assert r.Model(*r.init_args()).to(dt)(torch.rand(4, 16).to(dt)).dtype == torch.float32
        return
    assert not graph.fp32_casts, graph.fp32_casts
    for dt in runs:
        for scale in (1.0, 100.0):
            torch.manual_seed(0)
            model = r.Model(*r.init_args()).to(dt).eval()
            torch.manual_seed(1)
            x = (torch.randn(8, 16) * scale).to(dt)
            with torch.no_grad():
                eager = model(x)
                got = graph.interpret(x, copy.deepcopy(model))
                exact = copy.deepcopy(model).double()(x.double())
            assert got.dtype == eager.dtype == dt
            assert torch.equal(got.isnan(), eager.isnan()) and torch.equal(got.isinf(), eager.isinf())
            error = lambda t: (t.double() - exact).abs().nan_to_num(0, 0, 0).max().item()   # noqa: E731
            step = torch.finfo(dt).eps * exact.abs().nan_to_num(0, 0, 0).max().item()
            assert error(got) <= 2 * error(eager) + step, (dt, scale, error(got), error(eager))


def test_a_16_bit_builds_fmod_and_remainder_divide_by_the_number_in_the_modules_dtype(tmp_path):
    """torch's CUDA fmod / remainder of a 16-bit tensor take the number in its dtype (y % 0.7 of
    a bf16 y divides by 0.69921875); the CUDA a 16-bit build compiles does so (the identity in an
    fp32 build), but not for an upcast value's op, which torch computes in float32, nor in the
    backward's recomputation (fp32 builds only)."""
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    path = tmp_path / "mod.py"
    path.write_text(reference_text(["self.fc = nn.Linear(in_features, out_features)"],
                                   ["y = self.fc(x)", "x = (torch.fmod(y, 0.7) + y % 0.3) * (y.float() % 0.9).to(y.dtype)"],
                                   128))
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    source = generator.render_cuda_source(spec)
    rounded = "kgen::rounded_to_module<kgen_operand_t>({})".format
    assert f"fmodf((v2), {rounded('0.699999988f')})" in source
    assert f"fmodf((v2), {rounded('0.300000012f')})" in source
    assert "fmodf((v6), 0.899999976f)" in source and rounded("0.899999976f") not in source
    assert "fmodf((v2), 0.699999988f)" in source   # (the backward's recomputation: fp32 builds)
