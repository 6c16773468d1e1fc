"""Session 62's probe of Linears side by side on one input (CPU): the Llama / Mistral / Qwen / Gemma
MLP, `down_proj(act(gate_proj(x)) * up_proj(x))`, and gated units of two Linears as people write them,
generated over axes: how each Linear is held and called (nn.Linear, F.linear of parameters,
x @ W.t(), torch.matmul of a (K, N) weight; the two held alike or not), with biases or none, the
names, which is called first, the gate (silu, x * sigmoid(x) written out, gelu exact and tanh, relu,
a * sigmoid(b)), with a down projection after or not, on a (batch, K) or a (batch, tokens, K)
input. Taken: one GEMM of the weights concatenated whose output's halves are the Linears' outputs
(Tracer.side_by_side_gemm), checked against the module (check_taken: fp64 output and buffers,
gradients to the input and to EACH parameter through graph_vjp against torch.autograd, and bf16 /
fp16 against fp64); refused in one line where kgen would not be right; the emitted file keeps the
module's parameters and concatenates them in its forward (cached for inference only on trust).

Found and fixed: every module here was refused ("the input of a second GEMM is not a (batch,
features) value computed from the first GEMM"). Left: three or more Linears side by side (a QKV
projection: refused, naming them), unequal widths, one with a bias and one without, a bias added
after `x @ W.t()` when a down projection follows (a parameter of the half's width is the broadcast
tail's, which no GEMM may read: refused, naming the shape).
"""

import copy
import itertools

import pytest
import torch

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.trace import trace
from kgen.ir.graph import SIDE_BY_SIDE, Unsupported, gemm_weight
from kgen.tune.spec import Spec, Tile

from conftest import nvcc_prefetch, prefetch_dir, sm90a_check
from test_render import exec_file
from test_spellings_probe60_users import R3, check_taken, reference, source

# How a Linear `n` is held (its __init__ lines) and called on x (its output), with a bias or not.
HOLDERS = {
    "nn.Linear": (lambda n, b: f"self.{n} = nn.Linear(in_features, out_features, bias={b})",
                  lambda n, b: f"self.{n}(x)"),
    "F.linear": (lambda n, b: f"self.{n}_weight = nn.Parameter(torch.randn(out_features, in_features) / 4)"
                              + (f"\nself.{n}_bias = nn.Parameter(0.1 * torch.randn(out_features))" if b else ""),
                 lambda n, b: f"F.linear(x, self.{n}_weight{f', self.{n}_bias' if b else ''})"),
    "x @ W.t()": (lambda n, b: f"self.{n}_weight = nn.Parameter(torch.randn(out_features, in_features) / 4)"
                               + (f"\nself.{n}_bias = nn.Parameter(0.1 * torch.randn(out_features))" if b else ""),
                  lambda n, b: f"(x @ self.{n}_weight.t(){f' + self.{n}_bias' if b else ''})"),
    "torch.matmul of (K, N)": (lambda n, b: f"self.{n}_weight = nn.Parameter(torch.randn(in_features, out_features) / 4)",
                               lambda n, b: f"torch.matmul(x, self.{n}_weight)"),
}
NAMES = [("gate_proj", "up_proj"), ("w1", "w3"), ("fc1", "fc2"), ("wi_0", "wi_1")]
# The gate of g (the gated Linear's output) and u (the other's), into x.
GATES = {
    "F.silu(g) * u (SwiGLU)": "x = F.silu(g) * u",
    "g * torch.sigmoid(g) * u (silu written out)": "x = g * torch.sigmoid(g) * u",
    "nn.SiLU()(g) * u": "x = nn.SiLU()(g) * u",
    "F.gelu(g, approximate='tanh') * u (Gemma's GeGLU)": "x = F.gelu(g, approximate='tanh') * u",
    "F.gelu(g) * u": "x = F.gelu(g) * u",
    "torch.relu(g) * u (ReGLU)": "x = torch.relu(g) * u",
    "u * torch.sigmoid(g) (GLU)": "x = u * torch.sigmoid(g)",
}
DOWN = "self.down_proj = nn.Linear(out_features, in_features, bias=False)"


def spelling(gate_holder: str, up_holder: str, bias: bool, names: tuple, gate_first: bool, gate: str,
             down: bool) -> tuple[str, str]:
    """(__init__'s lines, forward's lines) of one module of the axes."""
    bias = bias and "matmul" not in gate_holder + up_holder   # (a (K, N) weight is held without one here)
    (g_name, u_name), (g_init, g_call), (u_init, u_call) = names, HOLDERS[gate_holder], HOLDERS[up_holder]
    init = [g_init(g_name, bias), u_init(u_name, bias)] + ([DOWN] if down else [])
    calls = [f"g = {g_call(g_name, bias)}", f"u = {u_call(u_name, bias)}"]
    body = (calls if gate_first else calls[::-1]) + [GATES[gate]] + (["x = self.down_proj(x)"] if down else [])
    return "\n".join(init), "\n".join(body)


def cases() -> list[tuple]:
    """A covering sample of the axes: every gate with every holder of the gated Linear, with and
    without biases; the other Linear's holder, the names, the call order, the down projection and
    the input's shape rotated through their values."""
    out = []
    holders = list(HOLDERS)
    for i, (gate, gate_holder, bias) in enumerate(itertools.product(GATES, holders, (False, True))):
        up_holder = holders[(holders.index(gate_holder) + i // 3) % len(holders)]
        down = i % 2 == 0
        if bias and "x @ W.t()" in (gate_holder, up_holder):
            # (a bias added after x @ W.t() is no Linear's own: beside one that is, refused, and with
            # a down projection after, refused: test_refused)
            up_holder = gate_holder = "x @ W.t()"
            down = False
        out.append((gate_holder, up_holder, bias, NAMES[i % len(NAMES)], i % 3 != 1, gate, down,
                    R3 if i % 4 in (1, 2) else (8, 16)))
    return out


CASES = cases()


def _id(case) -> str:
    gate_holder, up_holder, bias, names, gate_first, gate, down, shape = case
    return (f"{gate.split(' (')[0]}-{gate_holder}+{up_holder}-{'bias' if bias else 'nobias'}-{names[0]}-"
            f"{'gatefirst' if gate_first else 'upfirst'}-{'down' if down else 'nodown'}-{'x'.join(map(str, shape))}")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_taken_and_right(tmp_path, case):
    *axes, shape = case
    init, body = spelling(*axes)
    ref = reference(tmp_path, source(init, body, shape=shape, args="16, 24"))
    graph = trace(ref)
    first = graph.parts[0]
    # one GEMM of both weights (48 features), its output's halves the two Linears'
    assert first.gemm.attrs.get("side_by_side") and first.out_features == 48
    assert sorted(n.attrs["half"] for n in first.halves) == [0, 1]
    assert len(graph.parts) == 1 + axes[-1]
    check_taken(ref, graph)


def test_the_weight_is_the_linears_in_call_order(tmp_path):
    """Half 0 is the Linear called first, whichever it is: up_proj's rows first where it is."""
    init, body = spelling("nn.Linear", "nn.Linear", True, NAMES[0], False, "F.silu(g) * u (SwiGLU)", True)
    ref = reference(tmp_path, source(init, body, args="16, 24"))
    graph = trace(ref)
    model = ref.Model(*ref.init_args())
    gemm = graph.parts[0].gemm
    assert gemm.attrs["side_by_side"] == ("up_proj.weight", "gate_proj.weight")
    assert torch.equal(gemm_weight(model, gemm), torch.cat([model.up_proj.weight, model.gate_proj.weight]))
    bias = next(n for n in graph.parts[0].params if n.level == "col")
    assert bias.attrs["path"] == "<side by side up_proj.bias gate_proj.bias>"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [True, False])
def test_each_linear_rounds_once_in_16_bits(tmp_path, dtype, bias):
    """In a 16-bit module each half is what the oracle gives its Linear alone: with a bias, its
    output rounded once after the bias from the fp32 sum of its products (torch's addmm on the GPU,
    graph.linear_steps); without, torch's own Linear of the dtype. The concatenation changes no dot
    product, and rounds nothing twice."""
    init, body = spelling("nn.Linear", "nn.Linear", bias, NAMES[0], False, "F.silu(g) * u (SwiGLU)", False)
    ref = reference(tmp_path, source(init, body, args="16, 24"))
    first = trace(ref).parts[0]
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).to(dtype)
    x = (4 * torch.randn(64, 16)).to(dtype)
    with torch.no_grad():
        values = first.part_values(x, copy.deepcopy(model))
        for half, linear in zip(sorted(first.halves, key=lambda n: n.attrs["half"]), (model.up_proj, model.gate_proj)):
            once = torch.nn.functional.linear(x.float(), linear.weight.float(), linear.bias.float()).to(dtype) \
                if bias else linear(x)
            assert torch.equal(values[half.id], once)


@pytest.mark.parametrize("body", ["x = F.linear(x, self.w, self.b) * torch.sigmoid(F.linear(x, self.w))",
                                  "x = F.linear(x, self.w) * torch.sigmoid(F.linear(x, self.w, self.b))"])
def test_one_weight_with_its_bias_and_without_is_one_gemm(tmp_path, body):
    """Not two Linears side by side: one GEMM, its bias added where the call adds it."""
    init = ("self.w = nn.Parameter(torch.randn(out_features, in_features) / 4)\n"
            "self.b = nn.Parameter(torch.randn(out_features))")
    ref = reference(tmp_path, source(init, body, args="16, 24"))
    graph = trace(ref)
    assert len(graph.parts) == 1 and "side_by_side" not in graph.gemm.attrs and graph.out_features == 24
    check_taken(ref, graph)


# Side by side, not taken: one line naming what is not.
REFUSED = {
    "widths differ": ("self.a = nn.Linear(in_features, out_features)\nself.b = nn.Linear(in_features, 2 * out_features)",
                      "x = self.a(x).sum(-1, keepdim=True) * self.b(x)", "different widths (a.weight: 24, b.weight: 48)"),
    "three Linears (QKV)": ("self.q = nn.Linear(in_features, out_features)\nself.k = nn.Linear(in_features, out_features)\n"
                            "self.v = nn.Linear(in_features, out_features)",
                            "x = self.q(x) * self.k(x) * self.v(x)", "3 Linears of the module's input side by side"),
    "a bias and none": ("self.a = nn.Linear(in_features, out_features)\nself.b = nn.Linear(in_features, out_features, bias=False)",
                        "x = F.silu(self.a(x)) * self.b(x)", "some with a bias and some without"),
    "a Linear of x after a chained one": ("self.a = nn.Linear(in_features, in_features)\nself.b = nn.Linear(in_features, in_features)",
                                          "x = self.b(self.a(x)) * self.b(x)", "the module's input, after a GEMM of a value"),
    "beside a Linear of a computed value": ("self.a = nn.Linear(in_features, out_features)\nself.b = nn.Linear(in_features, out_features)\n"
                                            "self.c = nn.Linear(out_features, out_features)",
                                            "x = self.b(x) * self.c(self.a(x))", "computed before the GEMM"),
    "F.linear with a bias beside x @ W.t() + b": (
        "self.w1 = nn.Parameter(torch.randn(out_features, in_features))\nself.w2 = nn.Parameter(torch.randn(out_features, in_features))\n"
        "self.b1 = nn.Parameter(torch.randn(out_features))\nself.b2 = nn.Parameter(torch.randn(out_features))",
        "x = F.silu(F.linear(x, self.w1, self.b1)) * (x @ self.w2.t() + self.b2)", "some with a bias and some without"),
    "a bias added after x @ W.t(), then a down projection": (
        "self.w1 = nn.Parameter(torch.randn(out_features, in_features))\nself.w2 = nn.Parameter(torch.randn(out_features, in_features))\n"
        f"self.b1 = nn.Parameter(torch.randn(out_features))\n{DOWN}",
        "x = self.down_proj(F.silu(x @ self.w1.t() + self.b1) * (x @ self.w2.t()))", "second GEMM is a value of shape"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused(tmp_path, name):
    init, body, words = REFUSED[name]
    ref = reference(tmp_path, source(init, body, args="16, 24"))
    with pytest.raises(Unsupported, match="line") as e:
        trace(ref)
    assert words in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


# ---- the emitted file ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """LlamaMLP's emitted file (exec'd on the host) and its reference."""
    folder = tmp_path_factory.mktemp("llama")
    init, body = spelling("nn.Linear", "nn.Linear", True, NAMES[0], True, "F.silu(g) * u (SwiGLU)", True)
    ref = reference(folder, source(init, body, shape=R3, args="16, 24"))
    spec = Spec.of(str(ref.path), 20, 16, 16, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    return text, exec_file(text), ref


def test_the_file_keeps_the_modules_parameters(llama):
    """ModelNew is the module's class: the same parameters and state_dict (no concatenated copy
    registered), its weight method their concatenation, its bias operand theirs."""
    text, module, ref = llama
    assert check_emitted(text) == []
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args())
    new = module.ModelNew(*ref.init_args())
    new.load_state_dict(model.state_dict())
    assert list(new.state_dict()) == list(model.state_dict())
    assert torch.equal(new._kgen_weight0(), torch.cat([model.gate_proj.weight, model.up_proj.weight]))
    assert f"{SIDE_BY_SIDE}(self.gate_proj.bias, self.up_proj.bias)" in text
    # the gradient of the concatenation reaches each weight, as autograd splits torch.cat's
    g = torch.randn(48, 16)
    new._kgen_weight0().backward(g)
    assert torch.equal(new.gate_proj.weight.grad, g[:24]) and torch.equal(new.up_proj.weight.grad, g[24:])


def test_the_concatenation_is_cached_on_trust_and_without_gradients_only(llama, monkeypatch):
    """_kgen_side_by_side concatenates on every call, unless the user trusts version counters and
    no gradient is wanted: then it reuses the concatenation while the tensors' versions, storages,
    dtypes and shapes hold, and concatenates again after any of them changes."""
    _, module, ref = llama
    model = module.ModelNew(*ref.init_args())
    a, b = model.gate_proj.weight, model.up_proj.weight
    cat = module._kgen_side_by_side
    with torch.no_grad():
        assert cat(a, b) is not cat(a, b)   # (not trusted: a copy each call)
    monkeypatch.setattr(module, "_KGEN_TRUST_WEIGHT_VERSIONS", True)
    first = cat(a, b)
    assert first.requires_grad and first.grad_fn is not None and cat(a, b) is not first   # (a gradient wanted)
    with torch.no_grad():
        kept = cat(a, b)
        assert cat(a, b) is kept and torch.equal(kept, torch.cat([a, b])) and not kept.requires_grad
        a.add_(1.0)   # (an optimizer's step: in place, a new version)
        again = cat(a, b)
        assert again is not kept and torch.equal(again, torch.cat([a, b]))
        assert cat(b, a) is not again   # (another order, another concatenation)
    model.gate_proj.weight.data = a.detach().double().float().clone()   # (a new storage under the same tensor)
    with torch.no_grad():
        moved = cat(model.gate_proj.weight, b)
        assert moved is not again and torch.equal(moved, torch.cat([model.gate_proj.weight, b]))
    with torch.inference_mode():   # (what was kept, kept outside inference mode, serves it too)
        assert cat(a, b) is moved and not moved.is_inference()
    with pytest.raises(ValueError, match="one shape"):
        cat(a, b[:3])
    del model, a, b, first, kept, again, moved
    import gc
    gc.collect()
    assert module._KGEN_SIDE_BY_SIDE == {}   # (the entries die with the tensors)


def test_only_a_file_with_linears_side_by_side_concatenates(llama):
    _, module, _ = llama
    assert hasattr(module.ModelNew, "kgen_trust_weight_versions")
    plain = exec_file(generator.render(Spec.of("gemm_scale_bn", 64, 296, 96, math="tf32x3", backend="wgmma", fusion=2,
                                               tile=Tile(128, 128, 32, 16, 128, stages=4))))
    assert not hasattr(plain, SIDE_BY_SIDE) and not hasattr(plain.ModelNew, "kgen_trust_weight_versions")


def test_the_model_copies_as_eager_s(llama):
    """(deepcopy of ModelNew: a module of plain parameters, nothing of the cache on it)"""
    _, module, ref = llama
    new = module.ModelNew(*ref.init_args())
    twin = copy.deepcopy(new)
    assert all(torch.equal(p, q) for p, q in zip(new.parameters(), twin.parameters()))


def _compiled_spec(folder) -> Spec:
    """Gemma's MLP with biases, up_proj called first: one side-by-side part, then down_proj."""
    init, body = spelling("nn.Linear", "nn.Linear", True, NAMES[0], False,
                          "F.gelu(g, approximate='tanh') * u (Gemma's GeGLU)", True)
    path = folder / "side_by_side_mlp.py"
    path.write_text(source(init, body, args="16, 24"))
    return Spec.of(str(path), 8, 16, 16, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))


@nvcc_prefetch(lambda p: sm90a_check(generator.render_cuda_source(_compiled_spec(prefetch_dir("side_by_side", p)))))
@pytest.mark.parametrize("name", ["gemma_mlp"])
def test_the_kernels_compile(name):
    """The side-by-side part's kernels (the halves read at j and j + N / 2, their backward) and the
    chained down projection's compile for sm_90a without spills."""
    from test_compile import NVCC, SM90A, compile_check, spills

    source_text = generator.render_cuda_source(_compiled_spec(prefetch_dir("side_by_side", {"name": name})))
    assert "j + N / 2" in source_text
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source_text, (SM90A,))) == []
