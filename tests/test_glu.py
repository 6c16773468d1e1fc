"""Gated units (GLU, SwiGLU, GEGLU) of one Linear's output halves (CPU): the two halves of a
(batch, N) value as chunk / split / narrow / slicing / F.glu / nn.GLU write them, each a (batch, N / 2)
value (a `half` node, as a pooled one), traced into the IR and checked against the module (check_taken:
fp64 output, buffers and gradients through graph_vjp, and bf16 / fp16 against fp64); what is not a
half refused in one line; the row kernels (forward and backward) run on the host against the module;
the emitted file's kernels compiled by nvcc."""

import pytest
import torch
import torch.nn.functional as F

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.problems import graph as part_graph
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported
from kgen.lower import backward
from kgen.lower.forward import STAGE2_ROWS, lower
from kgen.tune.spec import Spec, Tile

from conftest import module_source, nvcc_prefetch, prefetch_dir, sm90a_check
from test_backward_host import GXX, check_row_kernel
from test_group_norm_host import build_row_function, oracle_case, row_main, run_row_function
from test_spellings_probe60_users import R3, check_taken, reference, source

needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")

L = "self.fc = nn.Linear(in_features, out_features)"
# How the two halves of h = self.fc(x) are taken: body lines that leave them in `a` and `b`.
SPLITS = {
    "chunk(2, dim=-1)": "a, b = self.fc(x).chunk(2, dim=-1)",
    "torch.chunk(h, 2, 1)": "h = self.fc(x)\na, b = torch.chunk(h, 2, 1)",
    "chunk(2, -1)[i]": "h = self.fc(x)\na = h.chunk(2, -1)[0]\nb = h.chunk(2, -1)[-1]",
    "split(N // 2, dim=-1)": "h = self.fc(x)\na, b = h.split(h.shape[-1] // 2, dim=-1)",
    "torch.split(h, [P, P], -1)": "h = self.fc(x)\nP = h.size(-1) // 2\na, b = torch.split(h, [P, P], -1)",
    "h[:, :P], h[:, P:]": "h = self.fc(x)\nP = h.shape[1] // 2\na, b = h[:, :P], h[:, P:]",
    "h[..., :P], h[..., P:]": "h = self.fc(x)\nP = h.shape[-1] // 2\na, b = h[..., :P], h[..., P:]",
    "narrow": "h = self.fc(x)\nP = h.shape[-1] // 2\na, b = h.narrow(-1, 0, P), torch.narrow(h, -1, P, P)",
}
GATES = {
    "silu(a) * b (SwiGLU)": "x = F.silu(a) * b",
    "gelu(b) * a (GEGLU)": "x = F.gelu(b) * a",
    "a * sigmoid(b) (GLU)": "x = a * torch.sigmoid(b)",
    "relu(a) * b (ReGLU)": "x = torch.relu(a) * b",
}


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("gate", GATES)
def test_gates(tmp_path, split, gate):
    ref = reference(tmp_path, source(L, f"{SPLITS[split]}\n{GATES[gate]}", args="16, 32"))
    graph = trace(ref)
    assert [n.attrs["half"] for n in graph.halves] == [0, 1]
    assert graph.output_level() == "pooled"
    check_taken(ref, graph)


# Whole modules: glu's own spellings, halves of a point-wise value, ops after the gate (a row
# reduction, a norm, a softmax, a second Linear: a chain), a (batch, tokens, K) input.
MODULES = {
    "F.glu(h, -1)": (L, "x = F.glu(self.fc(x), -1)", (8, 16)),
    "F.glu(h, dim=1) of a bias-free Linear": ("self.fc = nn.Linear(in_features, out_features, bias=False)",
                                             "x = F.glu(self.fc(x), dim=1)", (8, 16)),
    "nn.GLU()": (f"{L}\nself.glu = nn.GLU()", "x = self.glu(self.fc(x))", (8, 16)),
    "nn.Sequential(Linear, GLU)": ("self.net = nn.Sequential(nn.Linear(in_features, out_features), nn.GLU(dim=-1))",
                                   "x = self.net(x)", (8, 16)),
    "halves of a point-wise value": (L, "h = self.fc(x) * 0.5 + 1.0\na, b = h.chunk(2, -1)\nx = torch.tanh(a) * b", (8, 16)),
    "halves of two values": (L, "h = self.fc(x)\nP = h.shape[1] // 2\nx = F.silu(h)[:, :P] * h[:, P:]", (8, 16)),
    "one half used twice, the other once": (L, "a, b = self.fc(x).chunk(2, -1)\nx = a * a + torch.sigmoid(b) * a", (8, 16)),
    "one half alone": (L, "a, b = self.fc(x).chunk(2, -1)\nx = F.relu(b)", (8, 16)),
    "gate then a row softmax": (L, "a, b = self.fc(x).chunk(2, -1)\nx = torch.softmax(F.silu(a) * b, dim=-1)", (8, 16)),
    "gate then RMS by hand": (f"{L}\nself.g = nn.Parameter(torch.rand(out_features // 2) + 0.5)",
                              "a, b = self.fc(x).chunk(2, -1)\nx = F.silu(a) * b\n"
                              "x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", (8, 16)),
    "gate then nn.RMSNorm": (f"{L}\nself.norm = nn.RMSNorm(out_features // 2, eps=1e-6)",
                             "a, b = self.fc(x).chunk(2, -1)\nx = self.norm(F.silu(a) * b)", (8, 16)),
    "gate then F.normalize": (L, "x = F.normalize(F.glu(self.fc(x)), dim=-1)", (8, 16)),
    "gate then a LayerNorm written out": (L, "x = F.glu(self.fc(x))\n"
                                          "x = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)",
                                          (8, 16)),
    "gate then a row sum": (L, "a, b = self.fc(x).chunk(2, -1)\nx = (F.gelu(a) * b).sum(-1)", (8, 16)),
    "gate, scalar parameter": (f"{L}\nself.s = nn.Parameter(torch.tensor(0.7))",
                               "a, b = self.fc(x).chunk(2, -1)\nx = F.silu(a * self.s) * b", (8, 16)),
    "SwiGLU MLP (a second Linear)": (f"{L}\nself.out = nn.Linear(out_features // 2, in_features)",
                                     "a, b = self.fc(x).chunk(2, -1)\nx = self.out(F.silu(a) * b)", (8, 16)),
    "SwiGLU MLP on tokens": (f"{L}\nself.out = nn.Linear(out_features // 2, in_features)",
                             "a, b = self.fc(x).chunk(2, dim=-1)\nx = self.out(F.silu(a) * b)", R3),
    "GEGLU on tokens, then LayerNorm by a second part": (
        f"{L}\nself.out = nn.Linear(out_features // 2, in_features)\nself.norm = nn.LayerNorm(in_features)",
        "h = self.fc(x)\na, b = h[..., :h.shape[-1] // 2], h[..., h.shape[-1] // 2:]\nx = self.norm(self.out(a * F.gelu(b)))", R3),
    "a Linear, then a gated one": ("self.inp = nn.Linear(in_features, in_features)\n" + L,
                                   "x = F.glu(self.fc(torch.relu(self.inp(x))))", (8, 16)),
    "BatchNorm before the halves": (f"{L}\nself.bn = nn.BatchNorm1d(out_features)",
                                    "a, b = self.bn(self.fc(x)).chunk(2, -1)\nx = F.silu(a) * b", (8, 16)),
    "dropout after the gate": (f"{L}\nself.drop = nn.Dropout(0.0)",
                               "a, b = self.fc(x).chunk(2, -1)\nx = self.drop(F.silu(a) * b)", (8, 16)),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules(tmp_path, name):
    init, body, shape = MODULES[name]
    ref = reference(tmp_path, source(init, body, shape=shape, args="16, 32"))
    check_taken(ref, trace(ref))


# Not halves, or halves kgen does not take: one line naming the op.
REFUSED = {
    "chunk(3)": ("x, _, _ = self.fc(x).chunk(3, -1)", "chunk(3)"),
    "chunk over the batch": ("a, b = self.fc(x).chunk(2, 0)\nx = a * b", "halves the features"),
    "a third of the columns": ("h = self.fc(x)\nx = h[:, :8]", "selects elements"),
    "split into unequal parts": ("a, b = self.fc(x).split([10, 22], -1)\nx = a", "split([10, 22])"),
    "an odd width": ("a, b = self.fc(x).chunk(2, -1)\nx = a", "odd"),
    "halves of a pooled value": ("h = F.max_pool1d(self.fc(x).unsqueeze(1), 2).squeeze(1)\na, b = h.chunk(2, -1)\nx = a * b",
                                 "halves a (batch, features) value"),
    "a pooling of a half": ("a, b = self.fc(x).chunk(2, -1)\nx = F.avg_pool1d(a.unsqueeze(1), 2).squeeze(1)",
                            "a second pooling"),
    "a half and a tile value together": ("h = self.fc(x)\na, b = h.chunk(2, -1)\nx = a * h", "another width"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused(tmp_path, name):
    body, words = REFUSED[name]
    ref = reference(tmp_path, source(L, body, args="16, 31" if name == "an odd width" else "16, 32"))
    with pytest.raises(Unsupported, match="line") as e:
        trace(ref)
    assert words in str(e.value), str(e.value)
    assert "\n" not in str(e.value).split("kgen synthesizes")[0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("body", ["x = F.glu(self.fc(x), -1)", "x = nn.GLU()(self.fc(x))"])
def test_glu_rounds_once_in_16_bits(tmp_path, body, dtype):
    """torch's glu computes a * sigmoid(b) in float32 and rounds once (ActivationGluKernel.cu: opmath_t);
    rounded at each step (sigmoid, then the product), a bf16 GLU before a written-out RMSNorm was 1.5x
    eager's error on the GPU (session 61's call B). The IR's output, to the bit, is torch's glu of the
    IR's own 16-bit Linear output (the Linear's rounding is test_linear_rounding's)."""
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)", body, args="16, 64"))
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).to(dtype)
    x = (torch.randn(64, 16) * 3).to(dtype)
    values = graph.part_values(x, model, x)
    z = values[next(n.args[0] for n in graph.live() if n.kind == "half")]
    assert z.dtype == dtype
    torch.testing.assert_close(values[graph.output], F.glu(z, -1), rtol=0, atol=0)


# ---- the row kernels on the host (g++, CUDA's block emulated: tests/test_group_norm_host.py,
# tests/test_backward_host.py) ---------------------------------------------------------------
# Gates as a part's epilogue after `x = self.gemm(x)` (conftest.module_source): the halves, each one's
# point-wise ops, ops after the gate that need the row (a softmax, a sum, an RMS), a one-element
# parameter on the halves.
HOST = {
    "swiglu": ("a, b = x.chunk(2, dim=-1)\nx = F.silu(a) * b", {}),
    "geglu_of_scaled": ("h = x * 0.5\nx = h[:, :h.shape[1] // 2] * F.gelu(h[:, h.shape[1] // 2:])", {}),
    "glu_softmax": ("x = torch.softmax(F.glu(x, -1) * 3.0, dim=1)", {}),
    "halves_of_two_values_sum": ("P = x.shape[1] // 2\nx = (torch.tanh(x)[:, :P] * x[:, P:]).sum(1, keepdim=True)", {}),
    "halves_scalar_param_rms": ("a, b = x.chunk(2, -1)\nx = F.silu(a * self.s) * b\n"
                                "x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                                {"s": "nn.Parameter(torch.rand(1) + 0.5)"}),
    # (the second half taken after the first one's softmax: two passes of halves, a reduction between)
    "second_half_after_a_softmax": ("P = x.shape[1] // 2\nr = torch.softmax(x[:, :P] * self.s, dim=1)\nx = r * x[:, P:] * self.s",
                                    {"s": "nn.Parameter(torch.rand(1) + 0.5)"}),
    "half_reduced_then_gated": ("a, b = x.chunk(2, -1)\nx = torch.softmax(a, dim=1) * torch.sigmoid(b) + b.mean(1, keepdim=True)", {}),
}


def _host_ref(tmp_path, name: str, width: int) -> str:
    body, params = HOST[name]
    ref = tmp_path / f"{name}.py"
    ref.write_text(module_source(body, params, width))
    return str(ref)


@needs_gxx
@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("name", HOST)
def test_the_forward_row_function_computes_the_gate(name, cached, tmp_path):
    """EvalStage2's row function (the GEMM stores S; the halves read it at j and j + N / 2) against
    the module in fp64, its rows cached in shared memory and not."""
    m, k, n = 3, 8, 64
    ref = _host_ref(tmp_path, name, n)
    low = lower(part_graph(ref, m, k, n).parts[0], False, False)
    assert low.eval.stage2 == STAGE2_ROWS and low.graph.halves
    assert low.output_width == ("N / 2" if low.output_level == "pooled" else "1")
    exe = build_row_function(low.eval.stage2_cuda, row_main("true, float, false", "false, float, false"),
                             tmp_path / "rows")
    s, operands, expected = oracle_case(ref, low, low.eval.stored, m, k, n)
    out = run_row_function(exe, cached, s, operands, expected.shape[1] if expected.dim() > 1 else 1)
    out = out.reshape(expected.shape).double()
    assert torch.allclose(out, expected, atol=2e-6, rtol=1e-5), (out - expected).abs().max().item()


@needs_gxx
@pytest.mark.parametrize("name", HOST)
def test_the_backward_row_kernel_sends_each_half_its_gradient(name, tmp_path):
    """BackwardRows (the halves' pass keeps each half's gradient at its columns; the last pass reads
    it at n and n - N / 2) against torch.autograd of the module: dL/dz, and the parameters'."""
    check_row_kernel(_host_ref(tmp_path, name, 1024), tmp_path, training=False)


# ---- lowering of every module above, and nvcc ---------------------------------------------------
def _module_file(folder, name: str):
    init, body, shape = MODULES[name]
    path = folder / "glu_module.py"
    path.write_text(source(init, body, shape=shape, args="16, 32"))
    return path


def _spec(name: str, folder, backend: str = "wgmma") -> Spec:
    """The module's spec at its own workload (a chain's last GEMM gives 16 features)."""
    out = 16 if "Linear(out_features // 2" in MODULES[name][0] else 32
    tile = Tile(128, 128, 32, 16, 128, stages=4) if backend == "wgmma" else Tile(128, 128, 32, 64, 32, stages=3)
    return Spec.of(str(_module_file(folder, name)), 8, 16, out, math="tf32x3", backend=backend, fusion=1, tile=tile)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_lowers_with_a_backward(tmp_path, name):
    """Each part renders (forward row kernel, BackwardRows) and has a backward kernel: nothing the
    halves bring is left to raise at backward(); the file passes kgen's and KernelBench's static
    checks."""
    spec = _spec(name, tmp_path)
    text = generator.render(spec)
    assert "half 1 of %" in text or "half 0 of %" in text
    assert check_emitted(text) == []
    # (an odd N at run time, whose halves differ in width, raises where no traced size pins N)
    assert (".shape[0] % 2:" in text) == (not spec.graph().sizes_read)
    for part in spec.graph().parts:
        assert backward.unsupported(lower(part, False, False)) is None


COMPILED = [("gate then a row softmax", "wgmma"), ("BatchNorm before the halves", "kgen"),
            ("SwiGLU MLP (a second Linear)", "wgmma")]


@nvcc_prefetch(lambda p: sm90a_check(generator.render_cuda_source(_spec(p["name"], prefetch_dir("glu", p), p["backend"]))))
@pytest.mark.parametrize("name, backend", COMPILED, ids=["softmax_wgmma", "batchnorm_mma", "chain_wgmma"])
def test_the_gated_kernels_compile(name, backend):
    from test_compile import NVCC, SM90A, compile_check, spills

    source_text = generator.render_cuda_source(_spec(name, prefetch_dir("glu", {"name": name, "backend": backend}), backend))
    assert "pool[1 * (N / 2) + j]" in source_text   # (the backward keeps the second half's gradient)
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source_text, (SM90A,))) == []


def test_halves_written_with_numbers_run_at_the_traced_sizes_only(tmp_path):
    """chunk(2) is half of any N; a slice's, split's or narrow's N / 2 is a number the trace baked in,
    so their files refuse other feature sizes (Graph.sizes_read) rather than halve another N."""
    def sizes_read(body: str) -> list:
        return trace(reference(tmp_path, source(L, body, args="16, 32"), "sizes")).sizes_read
    assert sizes_read("a, b = self.fc(x).chunk(2, -1)\nx = a * b") == []
    assert sizes_read("x = F.glu(self.fc(x))") == []
    for body in ("h = self.fc(x)\nx = h[:, :16] * h[:, 16:]", "a, b = self.fc(x).split(16, -1)\nx = a * b",
                 "h = self.fc(x)\nx = h.narrow(-1, 0, 16) * h.narrow(-1, 16, 16)"):
        assert sizes_read(body), body
