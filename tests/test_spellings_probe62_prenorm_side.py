"""Session 62: Linears side by side on the output of the ops before the first GEMM (CPU). The
pre-norm Llama MLP block, the most common MLP there is,

    h = self.post_attention_layernorm(x)
    x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

put the two features of this session together, a prologue (Tracer.prologue) and Linears side by
side (Tracer.side_by_side_gemm), and they did not compose: on a (batch, tokens, D) input `kgen
generate` crashed with an IndexError (Tracer.chain dropped the nodes of the part it closed, but a
value held with the input's leading sizes, _Marker("lead", node), kept its node's id, which the next
op read), and on a (batch, D) one it was refused ("two GEMMs of one value side by side are not
supported"). Now the Linear that reads the prologue's output closes the prologue, and its output is
taken as the module's input is (Tracer._side_by_side_source): three parts, the prologue, one GEMM of
the weights concatenated whose halves are the Linears' outputs, down_proj, with the raw input's
residual.

Generated here: the norm (nn.RMSNorm, Llama's RMSNorm by hand, nn.LayerNorm, HF's LlamaRMSNorm with
its float32 upcast, a Dropout after the norm or alone) x the block (the Llama block with its residual, the MLP alone with up_proj
called first, GeGLU of Linears with biases, a sum of two Linears) x the input ((batch, D), (batch,
tokens, D)) x the module's dtype (float32, bfloat16), each checked as the probes check (check_taken:
the IR against the module in fp64, gradients to the input and to every parameter through graph_vjp,
and bf16 / fp16 against fp64). What stays out is refused in one line naming it.
"""

import itertools
import re
import warnings

import pytest
import torch

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported, gemm_weight
from kgen.tune.spec import Spec, Tile

from conftest import nvcc_prefetch, prefetch_dir
from nvcc_jobs import check_job
from test_spellings_probe60_users import R3, check_taken, reference, source

W = "self.w = nn.Parameter(torch.rand(in_features) + 0.5)"
LLAMA_RMSNORM = '''

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
'''
# name -> (Model.__init__'s lines, the norm of x)
NORMS = {
    "nn.RMSNorm": ("self.post_attention_layernorm = nn.RMSNorm(in_features, eps=1e-6)",
                   "self.post_attention_layernorm(x)"),
    "Llama's RMSNorm by hand": (W, "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w"),
    "nn.LayerNorm": ("self.norm = nn.LayerNorm(in_features)", "self.norm(x)"),
    "nn.RMSNorm, then nn.Dropout(0.1)": (
        "self.norm = nn.RMSNorm(in_features, eps=1e-6)\nself.drop = nn.Dropout(0.1)", "self.drop(self.norm(x))"),
    # (in eval mode the identity: the prologue begun by it is dropped, and the Linears read x itself)
    "nn.Dropout(0.1) alone": ("self.drop = nn.Dropout(0.1)", "self.drop(x)"),
}
GATE_UP = ("self.gate_proj = nn.Linear(in_features, out_features, bias={b})\n"
           "self.up_proj = nn.Linear(in_features, out_features, bias={b})")
DOWN = "self.down_proj = nn.Linear(out_features, in_features, bias=False)"
# name -> (Model.__init__'s lines, forward's lines after `h = norm(x)`, the Linears in call order,
# whether a down projection follows)
BLOCKS = {
    "the Llama block (the raw input's residual)": (
        GATE_UP.format(b=False) + "\n" + DOWN,
        "x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))", ("gate_proj", "up_proj"), True),
    "the MLP alone, up_proj called first": (
        GATE_UP.format(b=False) + "\n" + DOWN,
        "u = self.up_proj(h)\nx = self.down_proj(F.silu(self.gate_proj(h)) * u)", ("up_proj", "gate_proj"), True),
    "GeGLU of Linears with biases, then the residual": (
        GATE_UP.format(b=True) + "\n" + DOWN,
        "x = x + self.down_proj(F.gelu(self.gate_proj(h), approximate='tanh') * self.up_proj(h))",
        ("gate_proj", "up_proj"), True),
    "a sum of two Linears": (
        "self.fc1 = nn.Linear(in_features, out_features)\nself.fc2 = nn.Linear(in_features, out_features)",
        "x = self.fc1(h) + self.fc2(h)", ("fc1", "fc2"), False),
}
SHAPES = {"2d": (8, 16), "3d": R3}
DTYPES = ["float32", "bfloat16"]


def module(norm: str, block: str, shape=(8, 16), dtype: str = "float32") -> str:
    """The reference: the norm of x, then the block; in bfloat16 as its author writes it (the
    module converted at the end of __init__, its input drawn in bfloat16)."""
    norm_init, expr = NORMS[norm] if norm in NORMS else ("self.post_attention_layernorm = LlamaRMSNorm(in_features)",
                                                         "self.post_attention_layernorm(x)")
    init, body, _, _ = BLOCKS[block]
    to = "\nself.to(torch.bfloat16)" if dtype == "bfloat16" else ""
    return source(f"{norm_init}\n{init}{to}", f"h = {expr}\n{body}", shape=shape, args="16, 24",
                  dtype=None if dtype == "float32" else dtype, prelude=LLAMA_RMSNORM)


def traced(tmp_path, text: str):
    ref = reference(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ref, trace(ref)


def cases() -> list[tuple]:
    """Every norm with every shape and dtype; the blocks rotated through them (each block with each
    norm at least once)."""
    blocks = list(BLOCKS)
    out = []
    for i, (norm, shape, dtype) in enumerate(itertools.product(NORMS, SHAPES, DTYPES)):
        out.append((norm, blocks[(i + i // 4) % len(blocks)], shape, dtype))
    return out


CASES = cases()


def _assert_three_parts(graph, block: str) -> None:
    """The prologue, one GEMM of the Linears' weights concatenated whose halves are their outputs,
    and down_proj where it follows."""
    _, _, linears, down = BLOCKS[block]
    prologue, side, *rest = graph.parts
    assert prologue.is_prologue and (prologue.in_features, prologue.out_features) == (16, 16)
    assert sorted(side.gemm.attrs["side_by_side"]) == sorted(f"{n}.weight" for n in linears)
    assert (side.in_features, side.out_features) == (16, 48)
    assert sorted(n.attrs["half"] for n in side.halves) == [0, 1]
    assert len(rest) == int(down) and not any(p.is_prologue or p.gemm.attrs.get("side_by_side") for p in rest)


@pytest.mark.parametrize("norm, block, shape, dtype", CASES, ids=["-".join(c) for c in CASES])
def test_taken_and_right(norm, block, shape, dtype, tmp_path):
    ref, graph = traced(tmp_path, module(norm, block, SHAPES[shape], dtype))
    _assert_three_parts(graph, block)
    check_taken(ref, graph)


def test_every_norm_and_block_is_sampled():
    assert {c[0] for c in CASES} == set(NORMS) and {c[1] for c in CASES} == set(BLOCKS)
    assert {(c[0], c[1]) for c in CASES} >= {(n, next(iter(BLOCKS))) for n in NORMS}


def test_the_weight_is_the_linears_concatenated(tmp_path):
    """The side-by-side part's weight is the Linears' weights concatenated in the order the part
    records (graph.SIDE_BY_SIDE), and half c of its output is Linear c of the norm's output."""
    ref, graph = traced(tmp_path, module("nn.RMSNorm", "the MLP alone, up_proj called first", R3))
    model = ref.Model(*ref.init_args())
    side = graph.parts[1]
    linears = [model.get_submodule(p.removesuffix(".weight")) for p in side.gemm.attrs["side_by_side"]]
    assert torch.equal(gemm_weight(model, side.gemm), torch.cat([linear.weight for linear in linears]))
    x = torch.randn(10, 16)
    with torch.no_grad():
        values = side.part_values(model.post_attention_layernorm(x), model)
        for half, linear in zip(sorted(side.halves, key=lambda n: n.attrs["half"]), linears):
            torch.testing.assert_close(values[half.id], linear(model.post_attention_layernorm(x)))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_hf_llama_rmsnorm_with_its_upcast_in_16_bits(shape, tmp_path):
    """HF's LlamaRMSNorm (its statistics in float32, `.to(input_dtype)` after) before the Llama MLP:
    in a bf16 / fp16 module, as eager computes it, to twice eager's error against fp64. (In an fp64
    module torch rounds to float32 there, which check_taken's fp64 comparison cannot match.)"""
    ref, graph = traced(tmp_path, module("LlamaRMSNorm", "the Llama block (the raw input's residual)", SHAPES[shape]))
    _assert_three_parts(graph, "the Llama block (the raw input's residual)")
    for dt in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).to(dt)
        x = torch.randn(20, 16, dtype=torch.float64).to(dt)
        with torch.no_grad():
            eager, got, want = model(x), graph.interpret(x, model), model.double()(x.double())
        error = lambda t: (t.double() - want).abs().max().item()   # noqa: E731
        assert got.dtype == dt
        assert error(got) <= 2 * error(eager) + torch.finfo(dt).eps * want.abs().max().item()


# ---- what stays out: one line naming it, never a traceback -----------------------------------------
THREE = ("self.n = nn.RMSNorm(in_features)\nself.a = nn.Linear(in_features, out_features, bias=False)\n"
         "self.b = nn.Linear(in_features, out_features, bias=False)\nself.c = nn.Linear(in_features, out_features, bias=False)\n"
         "self.o = nn.Linear(out_features, in_features, bias=False)")
REFUSED = {
    "three Linears of the norm's output": (
        "h = self.n(x)\nx = x + self.o(self.a(h) * self.b(h) * self.c(h))",
        r"line 18: .*3 Linears of the output of the ops before the first GEMM side by side \(a.weight, b.weight, c.weight\)"),
    "a Linear of the norm's output after a chained one": (
        "h = self.n(x)\nx = self.o(F.silu(self.a(h))) * self.b(h)",
        r"line 18: .*a second GEMM is a value computed before the GEMM at line 18"),
    "the norm's output after the GEMMs": (
        "h = self.n(x)\nx = self.o(self.a(h) * self.b(h)) + torch.relu(h)",
        r"line 18: .*a value computed before the GEMM at line 18 is used after it"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_in_one_line(name, shape, tmp_path):
    """In 3-d these crashed with an IndexError (a value with the input's leading sizes kept the id
    of a node of the part Tracer.chain had closed): each is one line naming what stays out."""
    body, words = REFUSED[name]
    ref = reference(tmp_path, source(THREE, body, shape=SHAPES[shape], args="16, 24"))
    with pytest.raises(Unsupported) as e:
        trace(ref)
    assert "\n" not in str(e.value)
    assert re.search(words, str(e.value)), str(e.value)


@pytest.mark.parametrize("body", ["y = self.a(x)\nx = self.o(y) * self.b(y)",
                                  "y = self.a(x)\nx = self.o(torch.relu(y)) + y"])
def test_a_value_of_a_closed_part_with_leading_sizes_is_refused(body, tmp_path):
    """(No prologue) A value of the part a chained GEMM closed, read again on a (batch, tokens, D)
    input: one line, not a node id of the dropped part."""
    init = THREE.replace("self.o = nn.Linear(out_features, in_features", "self.o = nn.Linear(out_features, out_features")
    init = init.replace("self.b = nn.Linear(in_features,", "self.b = nn.Linear(out_features,")
    ref = reference(tmp_path, source(init, body, shape=R3, args="16, 16"))
    with pytest.raises(Unsupported, match="line 18: .*computed before the GEMM at line 18") as e:
        trace(ref)
    assert "\n" not in str(e.value)


# ---- the emitted file ------------------------------------------------------------------------
def _spec(path, batch: int = 20) -> Spec:
    return Spec.of(str(path), batch, 16, 16, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))


def test_the_file_keeps_the_modules_parameters(tmp_path):
    """The emitted file: three parts (the prologue's, the side-by-side GEMM's, down_proj's), its
    weight method for part 1 the concatenation of gate_proj's and up_proj's weights, the module's
    own parameters (no copy registered), kgen's and KernelBench's static checks passed."""
    from test_render import exec_file

    path = tmp_path / "ref.py"
    path.write_text(module("nn.RMSNorm", "the Llama block (the raw input's residual)", R3))
    text = generator.render(_spec(path))
    assert check_emitted(text) == []
    assert "_KGEN_PROLOGUE_PARTS = (0,)" in text and "def _kgen_weight1(self)" in text
    assert "GEMM 1's weight: gate_proj.weight, up_proj.weight concatenated" in text
    emitted = exec_file(text)
    ref = reference(tmp_path, path.read_text())
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args())
    new = emitted.ModelNew(*ref.init_args())
    new.load_state_dict(model.state_dict())
    assert list(new.state_dict()) == list(model.state_dict())
    assert torch.equal(new._kgen_weight1(), torch.cat([model.gate_proj.weight, model.up_proj.weight]))


COMPILED = [("nn.RMSNorm", "the Llama block (the raw input's residual)"),
            ("nn.LayerNorm", "GeGLU of Linears with biases, then the residual")]
OPERANDS = ["float", "__nv_bfloat16"]


def _compiled_source(norm: str, block: str) -> str:
    folder = prefetch_dir("prenorm_side", {"norm": norm, "block": block})
    path = folder / "prenorm_side_mlp.py"
    path.write_text(module(norm, block))
    return generator.render_cuda_source(_spec(path, 8))


def _targets(operand: str) -> tuple:
    from test_compile import SM90A, half_build_targets
    return (SM90A,) if operand == "float" else half_build_targets(operand)


@nvcc_prefetch(lambda p: [check_job(_compiled_source(p["norm"], p["block"]), _targets(p["operand"]))])
@pytest.mark.parametrize("operand", OPERANDS)
@pytest.mark.parametrize("norm, block", COMPILED, ids=["llama_block", "layernorm_geglu"])
def test_the_kernels_compile(norm, block, operand):
    """nvcc: the file's kernels (the prologue's row kernel, the side-by-side part's halves read at j
    and j + N / 2, down_proj's, and their backward) for sm_90a in the fp32 and bf16 builds, no spills."""
    from test_compile import NVCC, compile_check, spills

    source_text = _compiled_source(norm, block)
    assert "constexpr bool kPrologue = true;" in source_text and "j + N / 2" in source_text
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source_text, _targets(operand))) == []
