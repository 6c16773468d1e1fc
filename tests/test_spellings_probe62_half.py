"""Session 62's probe of 16-bit semantics and small spellings left open by sessions 60-61 (CPU):
each a minimal module, what kgen did, what it does now. Where CPU eager and CUDA agree the oracle
(Graph.interpret) is checked against eager on the CPU; where they differ, against an emulation of
torch's CUDA kernel written here from its source (cited at each test). check_taken: the IR against
the module in fp64 (output, buffers, gradients through kgen.ir.autodiff.graph_vjp) and in bf16 /
fp16 against fp64.

Found and fixed:
- (WRONG, oracle and kernels) torch.add(y, z, alpha=a), torch.sub(y, z, alpha=a), y.add_(z,
  alpha=a), torch.addcmul(y, z1, z2, value=a) (value=1 too) and torch.addcdiv of 16-bit values:
  kgen rounded a * z (z1 * z2, z1 / z2) to the dtype first; torch's CUDA kernels compute the whole
  a + alpha * b in float32 (AddFunctor<opmath_t>, addcmul's and addcdiv's accscalar_t) and round
  once: a step off on a sixth to a quarter of the elements. Now in float32 between a to_opmath and
  a to_module_dtype (Tracer._opmath_kernel). (CPU eager's add with alpha rounds alpha * z first:
  the emulation of CUDA's is the judge.)
- (WRONG in the backward kernels) the backward recomputes the forward's values unrounded, and a
  comparison's VJP (where's mask, clamp / hardtanh / clamp_min bounds, relu, leaky_relu, min / max
  ties) compared them so, with the number unrounded: at y just above bf16(0.1) the forward's
  `torch.where(y > 0.1, ...)` chose b and the backward sent the gradient to a. Now a 16-bit
  build's backward compares those ops' operands rounded to the module's dtype, as the forward held
  them, and the numbers where eager's backward compares them in the tensor's dtype
  (derivatives.COMPARED_AS_HELD, BACKWARD_NUMBERS_IN_TENSOR_DTYPE; hardtanh_backward_cuda reads
  its bounds as opmath_t, unrounded).
- (REFUSED) nn.LayerNorm(P) / F.layer_norm of the gate `F.silu(a) * b` after `a, b =
  fc(x).chunk(2, -1)` ("LayerNorm of a pooled (batch, P) value"), where RMSNorm and F.normalize of
  it were taken: now written with row reductions over the P columns (Tracer._pooled_layer_norm),
  in float32 and rounded once in 16 bits, as torch's LayerNorm kernel.
- (REFUSED) `self.fc(x * 2)` (2 * x, -x, x / 4, x * self.t) on a (B, S, D) input where the forward
  reads its sizes (`B, S, D = x.shape`), taken where it does not (Tracer._input_scaling): the input
  with its leading sizes was not deferred as the input is. Now it is (Tracer._is_lead_input), and
  so is a residual made of it before the GEMM (`r = x * 0.5` ... `h.view(B, S, -1) + r`).
- (REFUSED) `h.reshape(b, s, H, -1)`, a per-head op, then the view back, on a (B, S, D) forward
  that reads its sizes: now the rows' (M, H, k) view (Tracer._lead_view), so a GroupNorm written
  out per head and a max / mean per head are taken as in a 2-d module. A per-head softmax stays
  refused, saying it is not taken (kgen's softmax runs over a row's features); a per-head
  F.layer_norm is refused naming F.group_norm of the rows, the same normalization (taken as
  it, its 16-bit statistics would be rounded where torch's LayerNorm keeps them in fp32).
- (REFUSED) InstanceNorm1d(1, affine=True) of y.unsqueeze(1) (F.instance_norm with a (1,) weight
  and bias): now the LayerNorm node of the upcast rows, then the one-number scale and shift,
  rounded once (torch's batch_norm kernel's (x - mean) * invstd * w + b in float32). Still
  refused, saying what is taken: affine=True of the (batch, features) value itself (a weight
  per row, torch's channels) and track_running_stats=True.
- (REFUSED) F.pairwise_distance(y, p) ("not supported"): now ATen's norm(y - p + eps, p) over the
  last dimension, a row reduction. F.cosine_similarity stays refused, now naming what is taken
  (ATen's clamp of each norm, with its own autograd, is not reproduced here).
- (REFUSED, kept) T5's `if self.wo.weight.dtype != h.dtype and ...: h = h.to(self.wo.weight.dtype)`:
  the message said "a branch on a traced value ... its values or dtype"; it now says why a dtype
  branch is refused (one trace serves the file's three builds) and names the cast that is taken
  without the if, h.to(self.wo.weight.dtype) (checked taken). Proving such a branch the same in
  every build is left.
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
from kgen.ir import derivatives
from kgen.ir.graph import Unsupported

from conftest import nvcc_prefetch, prefetch_dir, reference_text
from nvcc_jobs import NVCC, SM90A, report_job
from test_spellings_probe60_users import check_taken

HALF = [torch.bfloat16, torch.float16]
LIN = "self.fc = nn.Linear(in_features, out_features)"


def ref(tmp_path, body: list[str], init=(), name="ref", lines=("y = self.fc(x)",)) -> Reference:
    """A module whose forward runs `body` (its last line sets x) after `lines`."""
    path = tmp_path / f"{name}.py"
    path.write_text(reference_text([LIN, *init], [*lines, *body], 24))
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


def has(source: str, expr: str) -> bool:
    """Whether the CUDA source holds `expr`, V standing for any value's name (v12, ...), D for any
    gradient's (d12, ...)."""
    return re.search(re.escape(expr).replace("V", r"v\d+").replace("D", r"d\d+"), source) is not None


def render(folder: Path, name: str, init: list[str], body: list[str]) -> str:
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    path = folder / f"{name}.py"
    path.write_text(reference_text(init, body, 128))
    spec = Spec.of(str(path), 64, 96, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return generator.render_cuda_source(spec)


# ---- 1. add / sub with alpha, addcmul, addcdiv: in float32, rounded once --------------------------
# name -> (the forward's line, CUDA's kernel emulated on float32 y, r rounding a value to the dtype)
OPMATH_KERNELS = {
    "add_alpha": ("x = torch.add(y, y * y, alpha=0.3)", lambda y, r: y + r(y * y) * 0.3),
    "sub_alpha": ("x = torch.sub(y, torch.sigmoid(y), alpha=0.7)", lambda y, r: y - r(torch.sigmoid(y)) * 0.7),
    "add_method": ("x = y.add(y * y, alpha=-1.5)", lambda y, r: y + r(y * y) * -1.5),
    "add_inplace": ("x = y.add_(torch.sigmoid(y), alpha=0.3)", lambda y, r: y + r(torch.sigmoid(y)) * 0.3),
    "sub_inplace": ("y.sub_(torch.sigmoid(y), alpha=0.3)\nx = y", lambda y, r: y - r(torch.sigmoid(y)) * 0.3),
    "addcmul": ("x = torch.addcmul(y, torch.sigmoid(y), y, value=0.3)", lambda y, r: y + 0.3 * (r(torch.sigmoid(y)) * y)),
    "addcmul_value_1": ("x = torch.addcmul(y, torch.sigmoid(y), y)", lambda y, r: y + r(torch.sigmoid(y)) * y),
    "addcmul_method": ("x = y.addcmul(y, y, value=-0.5)", lambda y, r: y + -0.5 * (y * y)),
    "addcdiv": ("x = torch.addcdiv(y, torch.sigmoid(y), y + 3, value=0.3)",
                lambda y, r: y + 0.3 * (r(torch.sigmoid(y)) / r(y + 3))),
}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(OPMATH_KERNELS))
def test_add_with_alpha_and_addcmul_round_once(name, dt, tmp_path):
    """torch's CUDA add / sub: AddFunctor<opmath_t>, a + b * alpha in float32 (sub: alpha negated);
    addcmul: a + alpha * (float(b) * float(c)); addcdiv: a + alpha * (b / float(c))
    (PointwiseOpsKernel.cu, accscalar_t), each rounded once to the 16-bit dtype. The oracle against
    that emulation bit for bit (y is x: the identity Linear). Before: alpha * z rounded first."""
    line, emulate = OPMATH_KERNELS[name]
    r = ref(tmp_path, line.split("\n"))
    graph = trace(r)
    model = identity_model(r, dt)
    torch.manual_seed(1)
    x = (torch.randn(512, 16) * 2).to(dt)
    with torch.no_grad():
        y = model.fc(x).float()
        got = graph.interpret(x, copy.deepcopy(model))
        cuda = emulate(y, lambda t: t.to(dt).float()).to(dt)
        stepwise = emulate(y, lambda t: t.to(dt).float())   # (the old IR's: alpha * z rounded too)
    assert got.dtype == dt and torch.equal(got, cuda), (got != cuda).sum()
    assert any(n.op == "to_opmath" for n in graph.live()) and graph.node(graph.output).op == "to_module_dtype"
    if name.startswith(("add", "sub")) and "cmul" not in name and "cdiv" not in name:
        coef = {"add_alpha": 0.3, "sub_alpha": -0.7, "add_method": -1.5, "add_inplace": 0.3, "sub_inplace": -0.3}[name]
        old = (y + (stepwise - y).div(coef).to(dt).float().mul(coef).to(dt).float()).to(dt)
        assert not torch.equal(old, cuda)   # (a * z rounded first was another answer)


@pytest.mark.parametrize("name", ["add_alpha", "addcmul", "addcdiv", "sub_inplace"])
def test_add_with_alpha_and_addcmul_are_taken(name, tmp_path):
    """fp64 (gradients included) and bf16 / fp16 against fp64."""
    r = ref(tmp_path, OPMATH_KERNELS[name][0].split("\n"))
    check_taken(r, trace(r))


def test_an_upcast_operand_keeps_the_result_in_float32(tmp_path):
    """torch.add(h, y, alpha=a) with h float32 (an upcast): eager's result is float32, y read as
    float32 (the common dtype), nothing rounded, and no cast back: the forward casts it back."""
    r = ref(tmp_path, ["h = torch.add(y.float(), y * y, alpha=0.3)", "x = torch.addcmul(h, y, y, value=0.5).to(y.dtype)"])
    graph = trace(r)
    assert not graph.fp32_casts
    assert [n.op for n in graph.live()].count("to_module_dtype") == 1   # (the forward's own cast back)
    model = identity_model(r, torch.bfloat16)
    torch.manual_seed(1)
    x = (torch.randn(256, 16) * 2).bfloat16()
    with torch.no_grad():
        y = model.fc(x).float()
        want = (y + (y * y).bfloat16().float() * 0.3 + 0.5 * (y * y)).bfloat16()
        torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), want, rtol=0, atol=0)


def test_the_kernels_round_add_with_alpha_once(tmp_path):
    """In the emitted forward, alpha * z and the sum are fp32 values (not rounded to the module's
    dtype), the result rounded once (to_module_dtype)."""
    source = render(tmp_path, "alpha", [LIN.replace("out_features", "128")],
                    ["y = self.fc(x)", "x = torch.add(y, y * y, alpha=0.3)"])
    assert has(source, "const float V = ((V) * (0.300000012f));")
    assert has(source, "const float V = ((V) + (V));")
    assert has(source, "const float V = kgen::rounded_to_module<kgen_operand_t>((V));")
    assert not has(source, "kgen::rounded_to_module<kgen_operand_t>(((V) * (0.300000012f)))")


# ---- 2. the backward compares as the forward held its values --------------------------------------
COMPARING_BODY = ["y = self.fc(x)",
                  "h = torch.relu(y) + torch.where(y > 0.1, y, 0.0) + F.hardtanh(y, -0.3, 0.7) + torch.clamp(y, -0.2, 0.6)",
                  "h = h + y.clamp_min(0.05) + F.leaky_relu(y, 0.2) + torch.maximum(y, torch.tanh(y))",
                  "x = h + torch.where(y.float() < 0.9, y.float(), 0.0).to(y.dtype)"]
ROUND = "kgen::rounded_to_module<kgen_operand_t>"


def test_the_backward_compares_values_as_the_forward_held_them(tmp_path):
    """The pointwise backward (struct Backward) of a 16-bit build: where's comparison, clamp's and
    clamp_min's bounds with the value and the number rounded to the module's dtype (eager compares
    the saved 16-bit input with the Scalar in scalar_t); hardtanh's value rounded, its bounds not
    (hardtanh_backward_cuda: opmath_t bounds); relu's result and leaky_relu's input rounded, 0
    as it is; maximum's tie of two rounded values; the upcast's comparison as it is (fp32).
    Before: every comparison of the unrounded recomputation with the number as it is."""
    source = render(tmp_path, "comparing", [LIN.replace("out_features", "128")], COMPARING_BODY)
    backward = source[source.index("struct Backward {"):]
    backward = backward[:backward.index("\n};")]
    v, n = f"{ROUND}(V)", lambda c: f"{ROUND}({c})"
    assert has(backward, f"(({v}) > ({n('0.100000001f')}))) ? (D) : (0.0f)")             # where
    assert has(backward, f"(({v}) >= ({n('-0.200000003f')}))) && ((({v}) <= ({n('0.600000024f')})")   # clamp
    assert has(backward, f"(({v}) >= ({n('0.0500000007f')}))) ? (D) : (0.0f)")           # clamp_min
    assert has(backward, f"(({v}) > (-0.300000012f))) && ((({v}) < (0.699999988f))")       # hardtanh
    assert has(backward, f"(({v}) <= (0.0f))) ? (0.0f) : (D)")                              # relu
    assert has(backward, f"(({v}) > (0.0f))) ? (D) : (((D) * (0.200000003f)))")             # leaky_relu
    assert has(backward, f"(({v}) <= ({v}))) && ((({v}) >= ({v}))")                         # maximum's tie
    assert has(backward, "((((V) < (0.899999976f))) ? (D) : (0.0f))")                      # fp32: as it is
    assert "rounded_to_module<kgen_operand_t>(0.899999976f)" not in backward


class _ComparesOnly:
    """A math builder whose operands may only be compared: any other op of one fails. Tells
    whether a VJP reads its op's operands (and result) for its comparisons alone, which is what
    makes rounding them there change nothing but the comparisons (COMPARED_AS_HELD)."""

    class Operand:
        pass

    class Token:   # the gradient, a comparison's outcome, a number or a value made of them
        pass

    @staticmethod
    def c(value):
        return _ComparesOnly.Token()

    def __getattr__(self, name):
        def op(*args):
            if name not in ("gt", "ge", "lt", "le", "eq", "ne") and any(isinstance(a, _ComparesOnly.Operand) for a in args):
                raise AssertionError(f"{name} reads an operand")
            return _ComparesOnly.Token()
        return op


@pytest.mark.parametrize("name", sorted(derivatives.COMPARED_AS_HELD))
def test_the_ops_compared_as_held_read_their_operands_in_comparisons_alone(name):
    """So rounding the operands of these VJPs changes which branch they take and nothing else (the
    backward's arithmetic stays unrounded, as in every other op's VJP); an op outside the set, as
    softplus (its branch's product reads x), fails the same check."""
    from kgen.ir.ops import POINTWISE

    arity = POINTWISE[name].arity
    operands = [_ComparesOnly.Operand() for _ in range(arity)]
    attrs = {"where": {"compare": "gt"}, "minimum_const": {"other": 0.1}, "maximum_const": {"other": 0.1}}.get(name, {})
    derivatives.vjp(_ComparesOnly(), name, _ComparesOnly.Token(), _ComparesOnly.Operand(), operands, attrs)
    with pytest.raises(AssertionError, match="reads an operand"):
        derivatives.vjp(_ComparesOnly(), "softplus", _ComparesOnly.Token(), _ComparesOnly.Operand(),
                        [_ComparesOnly.Operand()], {})


# ---- 3. a LayerNorm of the gated half ----------------------------------------------------------
GATED = ["a, b = self.fc(x).chunk(2, -1)"]
GATED_NORMS = {
    "module": (["self.norm = nn.LayerNorm(12)"], "x = self.norm(F.silu(a) * b)"),
    "no_affine": (["self.norm = nn.LayerNorm(12, elementwise_affine=False, eps=1e-3)"], "x = self.norm(a * torch.sigmoid(b))"),
    "no_bias": (["self.norm = nn.LayerNorm(12, bias=False)"], "x = self.norm(F.gelu(a) * b) * 2"),
    "functional": (["self.w = nn.Parameter(torch.rand(12) + 0.5)", "self.b = nn.Parameter(torch.randn(12))"],
                   "x = F.layer_norm(F.silu(a) * b, (12,), self.w, self.b, 1e-5)"),
    "glu": (["self.norm = nn.LayerNorm(12)"], "x = torch.relu(self.norm(F.glu(self.fc(x), -1)))"),
}


@pytest.mark.parametrize("name", sorted(GATED_NORMS))
def test_a_layer_norm_of_the_gated_half_is_taken(name, tmp_path):
    """`a, b = fc(x).chunk(2, -1)` then nn.LayerNorm(P) / F.layer_norm of the gate: the row's mean
    and biased variance over its P columns, written with row reductions (Tracer._pooled_layer_norm,
    as RMSNorm and F.normalize of a pooled value are). Before: refused ("LayerNorm of a pooled
    (batch, P) value ...")."""
    init, line = GATED_NORMS[name]
    r = ref(tmp_path, [line], init, lines=GATED)
    graph = trace(r)
    assert sum(n.op == "mean" for n in graph.live()) == 2 and not any(n.kind == "groupnorm" for n in graph.live())
    check_taken(r, graph)


@pytest.mark.parametrize("dt", HALF)
def test_a_layer_norm_of_the_gated_half_rounds_once_as_torchs_kernel(dt, tmp_path):
    """torch's LayerNorm kernel on a 16-bit input: fp32 statistics and (x - mean) * rstd * w + b
    in fp32, rounded once. The oracle against that emulation (at activations of a few hundred,
    where fp16's squares overflow if rounded), to a step of the output."""
    r = ref(tmp_path, [GATED_NORMS["module"][1]], GATED_NORMS["module"][0], lines=GATED)
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).to(dt)
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.normal_()
    torch.manual_seed(1)
    x = (torch.randn(64, 16) * 30).to(dt)
    with torch.no_grad():
        got = graph.interpret(x, copy.deepcopy(model))
        a, b = model.fc(x).chunk(2, -1)
        gate = (F.silu(a) * b).float()
        want = F.layer_norm(gate, (12,), model.norm.weight.float(), model.norm.bias.float(), 1e-5).to(dt)
    assert got.dtype == dt and got.isfinite().all()
    torch.testing.assert_close(got, want, rtol=torch.finfo(dt).eps, atol=torch.finfo(dt).eps)
    assert (got == want).double().mean() > 0.95


def test_a_layer_norm_of_the_gated_half_lowers_with_a_backward(tmp_path):
    """The row kernel takes it, and the backward has kernels for it."""
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    path = tmp_path / "gated_norm.py"
    path.write_text(reference_text(["self.fc = nn.Linear(in_features, 256)", "self.norm = nn.LayerNorm(128)"],
                                   [*GATED, "x = self.norm(F.silu(a) * b)"], 256))
    spec = Spec.of(str(path), 64, 96, 256, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    assert "backward:  kgen kernels" in text
    assert "static constexpr int kKind = kgen::kBackwardStaged;" in generator.render_cuda_source(spec)


def test_a_layer_norm_of_the_gated_half_over_another_width_is_refused(tmp_path):
    with pytest.raises(Unsupported, match=r"LayerNorm over \(24,\) of a pooled value of 12 features"):
        trace(ref(tmp_path, ["x = F.layer_norm(F.silu(a) * b, (24,))"], lines=GATED))


# ---- 4. the input scaled before the GEMM, on a forward that reads the input's sizes ----------------
def lead_ref(tmp_path, body: list[str], name="lead") -> Reference:
    """A (8, 5, 16) input's module: fc = Linear(16, 24), fc2 = Linear(16, 16), t a 0-d parameter."""
    path = tmp_path / f"{name}.py"
    text = reference_text(["self.fc = nn.Linear(16, 24)", "self.fc2 = nn.Linear(16, 16)",
                           "self.t = nn.Parameter(torch.tensor(0.7))", "self.v = nn.Parameter(torch.rand(16))"], body, 24)
    path.write_text(text.replace("torch.rand(batch_size, in_features", "torch.rand(batch_size, 5, in_features"))
    return Reference(path)


SCALED_LEADS = {
    "times_two": ["B, S, D = x.shape", "x = self.fc(x * 2)", "x = x.view(B, S, -1)"],
    "number_left": ["B, S, D = x.shape", "x = self.fc(2 * x).view(B, S, -1)"],
    "then_rows": ["B, S, D = x.shape", "x = self.fc((x / 4).view(B * S, D)).view(B, S, -1)"],
    "negated": ["B, S, D = x.shape", "h = self.fc(-x)", "x = torch.relu(h)"],
    "parameter": ["B, S, D = x.shape", "h = self.fc(x * self.t)", "x = h.view(B, S, -1) * 3"],
    "size_method": ["b, s, _ = x.size()", "x = self.fc(x.mul(0.5)).reshape(b, s, -1)"],
    "residual_before": ["B, S, D = x.shape", "r = x * 0.5", "h = self.fc2(x)", "x = h.view(B, S, -1) + r"],
}


@pytest.mark.parametrize("name", sorted(SCALED_LEADS))
def test_the_input_scaled_before_the_gemm_with_its_sizes_read(name, tmp_path):
    """`B, S, D = x.shape` then `self.fc(x * 2)` on a (B, S, D) input: the input with its leading
    sizes is deferred as the plain input is (Tracer._deferrable, _input_scaling: the GEMM of x, z
    scaled before the bias), and a residual made before the GEMM is taken after it. Before:
    refused ("an op on the module's input before the GEMM"), taken on a (batch, D) input."""
    r = lead_ref(tmp_path, SCALED_LEADS[name])
    graph = trace(r)
    assert graph.leads   # (traced with the leading sizes the forward reads)
    check_taken(r, graph)


def test_what_the_gemm_reads_of_the_input_with_its_sizes_is_refused_as_before(tmp_path):
    """A per-feature scale says so as on the rows. An op that is no scaling by a number (x + 1) was
    refused too; since the prologue (session 62) it is a part of its own before the GEMM."""
    graph = trace(lead_ref(tmp_path, ["B, S, D = x.shape", "x = self.fc(x + 1).view(B, S, -1)"], name="plus"))
    assert graph.parts[0].is_prologue and len(graph.parts) == 2
    with pytest.raises(Unsupported, match=r"scaled before the GEMM by a value that is not one number"):
        trace(lead_ref(tmp_path, ["B, S, D = x.shape", "x = self.fc(x * self.v).view(B, S, -1)"], name="per_feature"))


# ---- 5. a per-head op of a (B, S, H, k) view ---------------------------------------------------------
HEADS = {
    "groupnorm_written_out": ["b, s, d = x.shape", "h = self.fc(x)", "g = h.reshape(b, s, 4, -1)",
                              "g = (g - g.mean(-1, keepdim=True)) / torch.sqrt(g.var(-1, keepdim=True, unbiased=False) + 1e-5)",
                              "x = g.reshape(b, s, -1)"],
    "rsqrt_of_squares": ["b, s, d = x.shape", "h = torch.relu(self.fc(x))", "g = h.view(b, s, 4, 6)", "m = g.mean(-1, keepdim=True)",
                         "v = ((g - m) ** 2).mean(-1, keepdim=True)", "x = ((g - m) * torch.rsqrt(v + 1e-3)).reshape(b, s, 24) * 2"],
    "max_per_head": ["b, s, d = x.shape", "h = self.fc(x)", "x = h.view(b, s, 4, 6).amax(-1)"],
    "group_norm_of_rows": ["b, s, d = x.shape", "h = self.fc(x)", "x = F.group_norm(h.reshape(-1, 24), 4, eps=1e-5).view(b, s, -1)"],
}


@pytest.mark.parametrize("name", sorted(HEADS))
def test_a_per_head_norm_of_a_view_with_the_leading_sizes(name, tmp_path):
    """h.view(b, s, H, -1) of a (B, S, D) forward that reads its sizes: the rows' (M, H, k) view,
    which a GroupNorm written out (one groupnorm node of H groups) and a max / mean pooling take
    as in a 2-d module, viewed back with the leading sizes (Tracer._lead_view). Before: refused
    ("reshape(x.size(0), x.size(1), 4, -1) of a value whose rows are ...")."""
    r = lead_ref(tmp_path, HEADS[name])
    graph = trace(r)
    assert any(n.kind in ("groupnorm", "pool") or n.op == "max" for n in graph.live())
    check_taken(r, graph)


@pytest.mark.parametrize("line, words", [
    ("x = h.reshape(b, s, 4, -1).softmax(-1).reshape(b, s, -1)", r"a softmax of each group of 6 features \(a per-head softmax\) is not taken"),
    ("x = F.layer_norm(h.view(b, s, 4, -1), (6,)).reshape(b, s, -1)",
     r"LayerNorm over \(6,\) of a \(batch, 4, 6\) view .*write F\.group_norm\(h\.reshape\(-1, 24\), 4, eps=eps\)"),
    ("x = h.view(h.size(0), 4, -1).softmax(-1).view(h.size(0), -1)", r"a per-head softmax\) is not taken"),
])
def test_a_per_head_softmax_or_layer_norm_is_refused_naming_what_to_write(line, words, tmp_path):
    """A softmax per group of k features has no kgen form (its softmax runs over a row's features);
    a LayerNorm per group is GroupNorm(H) of the rows, which the message names (refused, not taken
    as it: torch's GroupNorm rounds its statistics in 16 bits, LayerNorm does not)."""
    r = (lead_ref(tmp_path, ["b, s, d = x.shape", "h = self.fc(x)", line]) if "b, s" in line
         else ref(tmp_path, [line], lines=["h = self.fc(x)"]))   # (a (batch, D) module's view to (batch, H, k))
    with pytest.raises(Unsupported, match=words):
        trace(r)


# ---- 6. InstanceNorm1d(affine=True) ------------------------------------------------------------------
INSTANCE = {
    "module": (["self.norm = nn.InstanceNorm1d(1, affine=True)"], "x = self.norm(y.unsqueeze(1)).squeeze(1)"),
    "function": (["self.w = nn.Parameter(torch.rand(1) + 0.5)", "self.b = nn.Parameter(torch.randn(1))"],
                 "x = F.instance_norm(y.unsqueeze(1), weight=self.w, bias=self.b, eps=1e-3).squeeze(1)"),
    "weight_only": (["self.w = nn.Parameter(torch.rand(1) + 0.5)"],
                    "x = torch.tanh(F.instance_norm(y.unsqueeze(1), weight=self.w)[:, 0])"),
}


@pytest.mark.parametrize("name", sorted(INSTANCE))
def test_an_affine_instance_norm_of_one_channel_is_taken(name, tmp_path):
    """InstanceNorm1d(1, affine=True) of y.unsqueeze(1) (and F.instance_norm with a (1,) weight and
    bias): the rows' LayerNorm node of the upcast value, then its one-number scale and shift, cast
    back once (Tracer.instance_norm). Before: refused ("with affine=True")."""
    init, line = INSTANCE[name]
    r = ref(tmp_path, [line], init)
    graph = trace(r)
    assert any(n.kind == "groupnorm" for n in graph.live())
    check_taken(r, graph)


@pytest.mark.parametrize("dt", HALF)
def test_an_affine_instance_norm_rounds_once(dt, tmp_path):
    """torch's instance_norm is batch_norm of the (1, batch, N) view, whose CUDA kernel computes
    (x - mean) * invstd * w + b in float32 and rounds once: the oracle against that emulation (the
    norm of the value in float32, rounded once), to a step."""
    init, line = INSTANCE["module"]
    r = ref(tmp_path, [line], init)
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).to(dt)
    with torch.no_grad():
        model.norm.weight.fill_(1.37)
        model.norm.bias.fill_(-0.21)
    torch.manual_seed(1)
    x = (torch.randn(64, 16) * 3).to(dt)
    with torch.no_grad():
        got = graph.interpret(x, copy.deepcopy(model))
        y = model.fc(x).float()
        want = F.instance_norm(y.unsqueeze(1), weight=model.norm.weight.float(), bias=model.norm.bias.float()).squeeze(1).to(dt)
    torch.testing.assert_close(got, want, rtol=torch.finfo(dt).eps, atol=torch.finfo(dt).eps)
    assert (got == want).double().mean() > 0.95


@pytest.mark.parametrize("init, line, words", [
    ("self.norm = nn.InstanceNorm1d(8, affine=True)", "x = self.norm(y)", r"of the \(batch, features\) value itself with affine=True"),
    ("self.norm = nn.InstanceNorm1d(1, track_running_stats=True)", "x = self.norm(y.unsqueeze(1)).squeeze(1)",
     r"with running statistics \(track_running_stats=True"),
])
def test_what_an_instance_norm_is_not_taken_with_says_what_is(init, line, words, tmp_path):
    """Of the (batch, features) value itself torch's channels are the rows (a weight per row), and
    running statistics average the instances' over the batch: refused, naming what is taken."""
    with pytest.raises(Unsupported, match=words):
        trace(ref(tmp_path, [line], [init]))


# ---- the 16-bit builds of the emitted CUDA this session changed: nvcc compiles them ------------
COMPILED = {
    "comparing": ([LIN.replace("out_features", "128")], COMPARING_BODY),
    "alpha": ([LIN.replace("out_features", "128")],
              ["y = self.fc(x)", "x = torch.addcmul(torch.add(y, y * y, alpha=0.3), y, y, value=0.5)"]),
    "gated_norm": (["self.fc = nn.Linear(in_features, 128)", "self.norm = nn.LayerNorm(64)"],
                   [*GATED, "x = self.norm(F.silu(a) * b)"]),
    "instance_affine": (["self.fc = nn.Linear(in_features, 128)", "self.norm = nn.InstanceNorm1d(1, affine=True)"],
                        ["x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)"]),
}


def compiled_source(p: dict) -> str:
    return render(prefetch_dir("probe62_half", p), p["name"], *COMPILED[p["name"]])


@nvcc_prefetch(lambda p: [report_job(compiled_source(p), (SM90A, f"-DKGEN_OPERAND={p['operand']}"))])
@pytest.mark.parametrize("name", sorted(COMPILED))
@pytest.mark.parametrize("operand", ["__nv_bfloat16", "__half"])
def test_the_16_bit_builds_compile(name, operand):
    import nvcc_jobs

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    source = compiled_source({"name": name, "operand": operand})
    returncode, report = nvcc_jobs.result(report_job(source, (SM90A, f"-DKGEN_OPERAND={operand}")))
    assert returncode == 0, report[-4000:]
    assert "bytes spill stores" not in report or all(
        " 0 bytes spill stores" in line for line in report.splitlines() if "spill stores" in line), report[-4000:]


# ---- 7. F.pairwise_distance and F.cosine_similarity ---------------------------------------------------
DISTANCES = {
    "parameter": (["self.p = nn.Parameter(torch.randn(24))"], "x = F.pairwise_distance(y, self.p)"),
    "row_parameter_p1_keepdim": (["self.p = nn.Parameter(torch.randn(1, 24))"],
                                 "x = F.pairwise_distance(y, self.p, p=1.0, keepdim=True)"),
    "two_values_eps": ([], "x = torch.pairwise_distance(y, torch.tanh(y), eps=1e-3)"),
}


@pytest.mark.parametrize("name", sorted(DISTANCES))
def test_pairwise_distance_is_atens_norm_of_the_difference(name, tmp_path):
    """ATen's pairwise_distance: norm(x1 - x2 + eps, p) over the last dimension: a row reduction
    (the 2-norm in float32 inside, Tracer.norm). Before: refused ("not supported")."""
    init, line = DISTANCES[name]
    r = ref(tmp_path, [line], init)
    graph = trace(r)
    assert any(n.kind == "reduce" for n in graph.live())
    check_taken(r, graph)


def test_cosine_similarity_is_refused_naming_what_is_taken(tmp_path):
    with pytest.raises(Unsupported, match=r"torch\.cosine_similarity \(F\.cosine_similarity\) is not taken; kgen takes"):
        trace(ref(tmp_path, ["x = F.cosine_similarity(y, self.p, dim=-1)"], ["self.p = nn.Parameter(torch.randn(24))"]))


# ---- 8. a branch on a dtype (T5's) -----------------------------------------------------------------------
def test_a_branch_on_a_dtype_is_refused_saying_what_to_write(tmp_path):
    """T5's `if self.wo.weight.dtype != h.dtype and self.wo.weight.dtype != torch.int8: h =
    h.to(self.wo.weight.dtype)`: fx cannot trace the branch, and one trace serves the file's fp32,
    bf16 and fp16 builds, where a branch on the dtype may take another path in each (this one does
    not, but kgen cannot prove a branch so in general); the refusal now says so and names the
    cast that is taken, which this test checks is taken (fp64, bf16, fp16 and gradients)."""
    init = ["self.wo = nn.Linear(24, 24)"]
    branch = ["h = torch.relu(y)", "if self.wo.weight.dtype != h.dtype and self.wo.weight.dtype != torch.int8:",
              "    h = h.to(self.wo.weight.dtype)", "x = self.wo(h)"]
    with pytest.raises(Unsupported, match=r"a branch on a traced value's dtype: .*h\.to\(self\.wo\.weight\.dtype\), is taken"):
        trace(ref(tmp_path, branch, init))
    r = ref(tmp_path, ["h = torch.relu(y)", "h = h.to(self.wo.weight.dtype)", "x = self.wo(h)"], init, name="unbranched")
    graph = trace(r)
    assert not graph.fp32_casts
    check_taken(r, graph)
