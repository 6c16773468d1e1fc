"""Session 62: ops on the module's input before its first GEMM, a prologue (CPU). The pre-norm
block written everywhere, `x + fc2(gelu(fc1(ln(x))))`, and a classifier head's
`fc(dropout(pooled))`, were refused ("an op on the module's input before the GEMM, whose result
the GEMM reads"). Now the ops between the input and the first GEMM are a part of their own whose
"GEMM" is the identity (trace.Tracer.prologue, Graph.is_prologue; docs/design.md, Chained GEMMs):
its S is the input itself, its ops a row kernel or a point-wise kernel (lower.forward), its
backward's dz the input's gradient, and the first GEMM part reads its output as x.

Generated here (each prologue with two blocks, in turn): the prologue (LayerNorm as a module and
as F.layer_norm, with and without affine or bias, eps; RMSNorm as a module, F.rms_norm and Llama's / T5's by hand, dims -1 and positional;
activations as functions, methods and modules; Dropout as a module and F.dropout(training=
self.training); a norm then an activation) x the block after it (one Linear, an MLP of two, each
with and without the raw input's residual after) x the input ((batch, K) and (batch, tokens, K)),
each checked as the probes check (check_taken: the IR against the module in fp64, training and
eval, buffers, gradients through graph_vjp against torch.autograd, and in bf16 / fp16 against
fp64 to twice eager's error). What stays out is refused in one line naming the op.
"""

import warnings

import pytest
import torch

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported
from kgen.lower.forward import STAGE2_POINTWISE, STAGE2_ROWS, lower
from kgen.tune import search
from kgen.tune.spec import Spec, Tile

from conftest import nvcc_prefetch, prefetch_dir
from nvcc_jobs import check_job
from test_spellings_probe60_users import R3, check_taken, reference, source

W = "self.w = nn.Parameter(torch.rand(in_features) + 0.5)"
B = "self.b = nn.Parameter(0.1 * torch.randn(in_features))"
# name -> (Model.__init__ lines, the expression of the GEMM's input from x, whether it needs the
# input 2-d (a positional dim 1), whether it holds a Dropout)
PROLOGUES = {
    "nn.LayerNorm": ("self.norm = nn.LayerNorm(in_features)", "self.norm(x)", False),
    "nn.LayerNorm(eps=1e-6, elementwise_affine=False)": (
        "self.norm = nn.LayerNorm(in_features, eps=1e-6, elementwise_affine=False)", "self.norm(x)", False),
    "nn.LayerNorm(bias=False)": ("self.norm = nn.LayerNorm(in_features, bias=False)", "self.norm(x)", False),
    "F.layer_norm(x, (D,), w, b, eps)": (f"{W}\n{B}", "F.layer_norm(x, (x.shape[-1],), self.w, self.b, 1e-6)", False),
    "F.layer_norm(x, x.shape[-1:])": ("", "F.layer_norm(x, x.shape[-1:])", False),
    "nn.RMSNorm(eps=1e-6)": ("self.norm = nn.RMSNorm(in_features, eps=1e-6)", "self.norm(x)", False),
    "nn.RMSNorm(elementwise_affine=False)": ("self.norm = nn.RMSNorm(in_features, eps=1e-5, elementwise_affine=False)",
                                             "self.norm(x)", False),
    "F.rms_norm": (W, "F.rms_norm(x, (x.shape[-1],), self.w, 1e-6)", False),
    "Llama's RMSNorm by hand": (W, "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w", False),
    "T5's RMSNorm by hand (weight first, dim=-1)": (
        W, "self.w * (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6))", False),
    "RMSNorm by hand, dim 1 positional": (W, "x / torch.sqrt((x * x).mean(1, keepdim=True) + 1e-5) * self.w", True),
    "LayerNorm by hand, dim 1 positional": (
        "", "(x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)", True),
    "torch.relu": ("", "torch.relu(x)", False),
    "F.gelu": ("", "F.gelu(x)", False),
    "F.gelu(approximate='tanh')": ("", "F.gelu(x, approximate='tanh')", False),
    "x.sigmoid() * x (SiLU as methods)": ("", "x.sigmoid() * x", False),
    "nn.SiLU module": ("self.act = nn.SiLU()", "self.act(x)", False),
    "nn.Dropout(0.1) (a classifier head)": ("self.drop = nn.Dropout(0.1)", "self.drop(x)", False),
    "F.dropout(x, 0.2, self.training)": ("", "F.dropout(x, 0.2, self.training)", False),
    "LayerNorm then GELU": ("self.norm = nn.LayerNorm(in_features)", "F.gelu(self.norm(x))", False),
    "Dropout then LayerNorm": ("self.drop = nn.Dropout(0.1)\nself.norm = nn.LayerNorm(in_features)",
                               "self.norm(self.drop(x))", False),
}
DROPOUTS = {"nn.Dropout(0.1) (a classifier head)", "F.dropout(x, 0.2, self.training)", "Dropout then LayerNorm"}
L1 = "self.fc = nn.Linear(in_features, out_features)"
MLP = "self.fc1 = nn.Linear(in_features, 24)\nself.fc2 = nn.Linear(24, in_features)"
# name -> (Model.__init__ lines, forward's lines from h, the prologue's value)
BLOCKS = {
    "one Linear": (L1, "x = self.fc(h)"),
    "one Linear, the raw input's residual": (L1, "x = x + self.fc(h)"),
    "an MLP": (MLP, "x = self.fc2(F.gelu(self.fc1(h)))"),
    "a pre-norm MLP block (the raw input's residual)": (MLP, "x = x + self.fc2(F.gelu(self.fc1(h)))"),
}
SHAPES = {"(batch, K)": (8, 16), "(batch, tokens, K)": R3}


def cases() -> list[tuple[str, str, str]]:
    """Every prologue with two of the blocks, the blocks and the input's shapes taken in turn, so
    that each block meets every other prologue and each shape half of them (a prologue written for
    2-d inputs on those only)."""
    out = []
    blocks, shapes = list(BLOCKS), list(SHAPES)
    for k, prologue in enumerate(PROLOGUES):
        for j in range(2):
            block = blocks[(2 * k + j) % len(blocks)]
            shape = shapes[0] if PROLOGUES[prologue][2] else shapes[(k + j) % 2]
            out.append((prologue, block, shape))
    return out


def module(prologue: str, block: str, shape: str = "(batch, K)") -> str:
    init, expression, _ = PROLOGUES[prologue]
    block_init, body = BLOCKS[block]
    return source("\n".join(filter(None, (init, block_init))), f"h = {expression}\n{body}", SHAPES[shape])


def traced(tmp_path, text: str):
    ref = reference(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ref, trace(ref)


CASES = cases()


@pytest.mark.parametrize("prologue, block, shape", CASES, ids=["-".join(c) for c in CASES])
def test_a_prologue_is_taken(prologue, block, shape, tmp_path):
    ref, graph = traced(tmp_path, module(prologue, block, shape))
    first = graph.parts[0]
    assert first.is_prologue and not any(p.is_prologue for p in graph.parts[1:])
    assert len(graph.parts) == (3 if "MLP" in block else 2)
    assert (first.in_features, first.out_features) == (16, 16)
    # (a Dropout draws its mask in the prologue, as the module's draws it of x: reproduced)
    assert bool(graph.dropouts) == (prologue in DROPOUTS)
    assert all(d["reproduced"] for d in graph.dropouts)
    check_taken(ref, graph)


def test_every_prologue_and_block_is_sampled():
    assert {c[0] for c in CASES} == set(PROLOGUES)
    assert {c[1] for c in CASES} == set(BLOCKS)
    assert {c[2] for c in CASES} == set(SHAPES)


def test_a_16_bit_upcast_prologue_computes_as_eager(tmp_path):
    """Llama's RMSNorm with its float32 upcast (`h = x.float()` ... `.type_as(x)`): in a bf16 / fp16
    module the statistics in fp32 and the result rounded once, as eager computes it, to twice
    eager's error against fp64. (In an fp64 module torch rounds to float32 there: not compared.)"""
    body = ("h = x.float()\nh = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
            "x = x + self.fc(self.w * h.type_as(x))")
    ref, graph = traced(tmp_path, source(f"{W}\n{L1}", body, R3))
    assert graph.parts[0].is_prologue
    for dt in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).to(dt)
        x = torch.randn(20, 16, dtype=torch.float64).to(dt)
        with torch.no_grad():
            eager, got, want = model(x), graph.interpret(x, model), model.double()(x.double())
        error = lambda t: (t.double() - want).abs().max().item()   # noqa: E731
        assert got.dtype == dt
        assert error(got) <= 2 * error(eager) + torch.finfo(dt).eps * want.abs().max().item()


# ---- what stays out: one line naming the op ----------------------------------------------------
REFUSED = {
    "BatchNorm1d of the input": ("self.bn = nn.BatchNorm1d(in_features)\n" + L1, "x = self.fc(self.bn(x))",
                                 r"line 14: .*BatchNorm1d of the module's input before the first GEMM is not supported"),
    "a detached input": (L1, "x = self.fc(torch.relu(x.detach()))", r"a detached copy of the module's input"),
    "a pooling that changes the width": ("self.fc = nn.Linear(in_features // 2, out_features)",
                                         "x = self.fc(F.avg_pool1d(x, 2))", r"AvgPool1d of a value"),
    "no GEMM after the ops": (L1, "x = torch.relu(x)", r"has no GEMM after its ops on the input"),
    "a GEMM of the prologue's value after a chained one": (
        "self.ln = nn.LayerNorm(in_features)\nself.fc1 = nn.Linear(in_features, in_features)\n"
        "self.fc2 = nn.Linear(in_features, out_features)", "h = self.ln(x)\nx = self.fc2(self.fc1(h)) + self.fc2(h)",
        r"line 16: .*a second GEMM is a value computed before the GEMM at line 16 \(two GEMMs of one value"),
    "the prologue's value after the GEMM": ("self.ln = nn.LayerNorm(in_features)\n" + L1, "h = self.ln(x)\nx = self.fc(h) + h",
                                            r"a value computed before the GEMM at line 15 is used after it"),
    "a softmax over the batch": (L1, "x = self.fc(torch.softmax(x, dim=0))", r"softmax over dim=0"),
    "a dropout active in eval mode": (L1, "x = self.fc(F.dropout(x, 0.1))", r"active in eval mode"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_what_stays_out_is_refused_by_name(name, tmp_path):
    init, body, match = REFUSED[name]
    with pytest.raises(Unsupported, match=match) as e:
        traced(tmp_path, source(init, body))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["a GEMM of the prologue's value after a chained one", "the prologue's value after the GEMM"])
def test_what_stays_out_is_refused_by_name_on_a_3d_input(name, tmp_path):
    """On a (batch, tokens, K) input too, where the prologue's value kept its node's id with the
    input's leading sizes after the GEMM closed the prologue (an IndexError in Tracer.shape_of, or
    another part's node read), until Tracer.chain made it out of reach as its rows are."""
    init, body, match = REFUSED[name]
    with pytest.raises(Unsupported, match=match) as e:
        traced(tmp_path, source(init, body, R3))
    assert "\n" not in str(e.value)


def test_a_second_input_before_the_gemm_stays_refused(tmp_path):
    text = source(L1, "x = self.fc(x + y)").replace("def forward(self, x):", "def forward(self, x, y):").replace(
        "return [torch.randn(8, 16)]", "return [torch.randn(8, 16), torch.randn(8, 16)]")
    with pytest.raises(Unsupported, match=r"an op on an input after the first .* whose result the GEMM reads"):
        traced(tmp_path, text)


# ---- lowered and emitted --------------------------------------------------------------------------
def _spec(path, backend: str = "wgmma", batch: int = 20) -> Spec:
    tile = Tile(128, 128, 32, 16, 128, stages=4) if backend == "wgmma" else Tile(128, 128, 32, 64, 32, stages=3)
    return Spec.of(str(path), batch, 16, 16, math="tf32x3", backend=backend, fusion=1, tile=tile)


@pytest.mark.parametrize("prologue, kind", [("nn.LayerNorm", STAGE2_ROWS), ("Llama's RMSNorm by hand", STAGE2_ROWS),
                                            ("F.gelu", STAGE2_POINTWISE), ("nn.Dropout(0.1) (a classifier head)",
                                                                           STAGE2_POINTWISE)])
def test_a_prologue_is_lowered_without_a_gemm_and_emitted(prologue, kind, tmp_path):
    """The prologue part stores nothing in a stage 1 (its S is the input itself, the identity GEMM's
    node) and runs its ops in stage 2, a row kernel for a norm, a point-wise kernel for an
    activation, in training and eval; its S is read in the module's dtype (x as it is). The file
    passes kgen's and KernelBench's static checks, names no weight for the prologue, and refuses
    torch.autocast, whose build would read x converted."""
    path = tmp_path / "ref.py"
    path.write_text(module(prologue, "a pre-norm MLP block (the raw input's residual)"))
    spec = _spec(path)
    graph = spec.graph()
    low = lower(graph.parts[0], False, False)
    for plan in (low.train, low.eval):
        assert plan.stored == graph.parts[0].gemm.id
        assert plan.stage2 == kind
    assert "kSModuleTyped = true" in low.cuda
    text = generator.render(spec)
    assert check_emitted(text) == []
    assert "w = x.new_empty((x.shape[1], 0))" in text and "_KGEN_PROLOGUE_PARTS = (0,)" in text
    assert "x = _kgen_checked_input(x, weight1)" in text and "weight0" not in text
    assert "if autocast:\n            raise RuntimeError(\"this ModelNew's ops on its input before the first GEMM" in text
    source_text = generator.render_cuda_source(spec)
    assert "constexpr bool kPrologue = true;" in source_text and source_text.count("constexpr bool kPrologue = false;") == 2


@pytest.mark.parametrize("prologue", ["F.gelu", "nn.Dropout(0.1) (a classifier head)", "x.sigmoid() * x (SiLU as methods)"])
def test_a_point_wise_prologues_training_forward_computes_its_chain(prologue, tmp_path):
    """In training a point-wise part keeps z through KeepZEpilogue (kernels/entry_backward.cuh,
    forward_keeping_z_entry), which was EvalEpilogue: a prologue's is the identity (its chain is
    stage 2's), so its training forward returned x itself, not gelu(x), and the next GEMM's dW was
    wrong on the GPU (session 62's call C: 1.2e6x eager's error). KeepZEpilogue computes what the
    stage-2 kernel computes."""
    import re

    path = tmp_path / "ref.py"
    path.write_text(module(prologue, "one Linear"))
    low = lower(_spec(path).graph().parts[0], False, False)

    def apply_body(struct: str, var: str) -> str:
        body = re.search(r"struct " + struct + r" \{.*?float apply\(float (\w+), .*?\{\n(.*?)\n  \}", low.cuda, re.S)
        assert body, struct
        return re.sub(r"\b" + body.group(1) + r"\b", var, body.group(2))

    keep = apply_body("KeepZEpilogue", "v")
    assert keep == apply_body("EvalStage2", "v") and keep.count(";") > 2, keep


def test_the_cost_model_counts_the_prologues_pass(tmp_path):
    """search.predicted_ms: the same block with and without a LayerNorm before it differ by the
    prologue's read and write of x (its GEMMs the same)."""
    times = {}
    for name, text in (("with", module("nn.LayerNorm", "an MLP")),
                       ("without", source(MLP, "x = self.fc2(F.gelu(self.fc1(x)))"))):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        times[name] = search.predicted_ms(_spec(path, batch=4096), 132)
    extra = 8.0 * 4096 * 16 / (search.GEMV_BANDWIDTH * 1e6)
    assert times["with"] == pytest.approx(times["without"] + extra, rel=1e-9)


COMPILED = [("nn.LayerNorm", "a pre-norm MLP block (the raw input's residual)"),
            ("F.gelu", "one Linear"), ("nn.Dropout(0.1) (a classifier head)", "one Linear")]
OPERANDS = ["float", "__nv_bfloat16"]


def _compiled_source(prologue: str, block: str) -> str:
    folder = prefetch_dir("prologue", {"prologue": prologue, "block": block})
    path = folder / "ref.py"
    path.write_text(module(prologue, block))
    return generator.render_cuda_source(_spec(path))


def _targets(operand: str) -> tuple:
    from test_compile import SM90A, half_build_targets
    return (SM90A,) if operand == "float" else half_build_targets(operand)


@nvcc_prefetch(lambda p: [check_job(_compiled_source(p["prologue"], p["block"]), _targets(p["operand"]))])
@pytest.mark.parametrize("operand", OPERANDS)
@pytest.mark.parametrize("prologue, block", COMPILED, ids=["layernorm_block", "gelu_linear", "dropout_head"])
def test_the_prologue_kernels_compile(prologue, block, operand):
    """nvcc: the file's kernels in the fp32 build and the bf16 build (the prologue's row or point-wise
    kernel reading x in its dtype, its forward that keeps z, its backward writing dz), no spills."""
    from test_compile import NVCC, compile_check, spills

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(_compiled_source(prologue, block), _targets(operand))) == []


# Ops on the input the GEMM reads that earlier tests held refused (tests/test_spellings_probe53.py,
# tests/test_spellings_ops.py): each a prologue now.
FORMERLY_REFUSED = {
    "tanh(x), named first": "r = torch.tanh(x)\nx = self.fc(r)",
    "x + 2.0": "x = self.fc(x + 2.0)",
    "F.linear(x * x, W)": "x = F.linear(x * x, self.fc.weight)",
    "relu(x * 2)": "x = self.fc(torch.relu(x * 2))",
}


@pytest.mark.parametrize("name", FORMERLY_REFUSED)
def test_ops_once_refused_are_a_prologue(name, tmp_path):
    ref, graph = traced(tmp_path, source(L1, FORMERLY_REFUSED[name]))
    assert graph.parts[0].is_prologue and len(graph.parts) == 2
    check_taken(ref, graph)


# Whole modules as users write them: (init, body, input shape).
WHOLE_MODULES = {
    "a pre-norm block reading its sizes (B, S, D = x.shape)": (
        "self.ln = nn.LayerNorm(in_features)\n" + MLP,
        "B, S, D = x.shape\nh = self.fc1(self.ln(x).view(B * S, D))\nx = (x.view(B * S, D) + self.fc2(F.gelu(h))).view(B, S, D)",
        R3),
    "RoBERTa's classification head (dropout, dense, tanh, dropout, out_proj)": (
        "self.dropout = nn.Dropout(0.1)\nself.dense = nn.Linear(in_features, in_features)\n"
        "self.out_proj = nn.Linear(in_features, out_features)",
        "x = self.dropout(x)\nx = self.dense(x)\nx = torch.tanh(x)\nx = self.dropout(x)\nx = self.out_proj(x)", (8, 16)),
    "timm's ViT MLP half-block (norm2, Sequential MLP, Identity drop_path)": (
        "self.norm2 = nn.LayerNorm(in_features, eps=1e-6)\nself.mlp = nn.Sequential(nn.Linear(in_features, 32), nn.GELU(), "
        "nn.Dropout(0.0), nn.Linear(32, in_features), nn.Dropout(0.0))\nself.drop_path = nn.Identity()",
        "x = x + self.drop_path(self.mlp(self.norm2(x)))", R3),
    "a Sequential that starts with its LayerNorm": (
        "self.net = nn.Sequential(nn.LayerNorm(in_features), nn.Linear(in_features, out_features), nn.ReLU())",
        "x = self.net(x)", (8, 16)),
}


@pytest.mark.parametrize("name", WHOLE_MODULES)
def test_whole_modules_with_a_prologue(name, tmp_path):
    init, body, shape = WHOLE_MODULES[name]
    ref, graph = traced(tmp_path, source(init, body, shape))
    assert graph.parts[0].is_prologue
    check_taken(ref, graph)


@pytest.mark.parametrize("prologue", sorted(DROPOUTS))
def test_a_prologues_dropout_draws_the_modules_mask_in_training(prologue, tmp_path):
    """In training mode the IR's mask (ir.dropout_mask, the draw the emitted forward makes: F.dropout
    of ones of x's shape) is the one the module draws of x, seeded alike: the same output, and the
    generator left where the module leaves it (a later dropout draws the same mask)."""
    ref, graph = traced(tmp_path, module(prologue, "an MLP"))
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train()
    x = torch.randn(8, 16, dtype=torch.float64)
    torch.manual_seed(3)
    expect = model(x)
    after = torch.get_rng_state()
    torch.manual_seed(3)
    got = graph.interpret(x, model)
    torch.testing.assert_close(got, expect, rtol=1e-12, atol=1e-12)
    assert torch.equal(torch.get_rng_state(), after)
