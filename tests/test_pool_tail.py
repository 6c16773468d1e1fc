"""CPU tier of two node kinds of the GEMM-epilogue family: 1-d pooling over the features
(MaxPool1d / AvgPool1d of x.unsqueeze(1)) and broadcast tails (a parameter of another shape
broadcast onto the output, which then has a shape of its own).

For each form: the trace (levels and shapes), the IR's torch oracle against the module, the
lowering (what the row kernel and the tail compute), the rendered file (ast + static rules) and
nvcc compile-only of its CUDA; refusals name the op.
"""

import ast

import pytest
import torch

from kgen.codegen import generator
from kgen.lower import forward as lower
from kgen.ir.graph import Unsupported, broadcast_shapes
from kgen.frontend.reference import Reference
from kgen.tune.spec import Spec, Tile
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace

from conftest import module_source, nvcc_prefetch, prefetch_dir, sm90a_check
from test_ir import SMALL, check_oracle



def module(tmp_path, body: str, shape: str = "1") -> Reference:
    """A module with a parameter `extra` of `shape` and a per-feature `bias2`, 1024 features."""
    path = tmp_path / "ref.py"
    path.write_text(module_source(body, {"extra": f"nn.Parameter(torch.randn({shape}))",
                                         "bias2": "nn.Parameter(torch.randn(out_features))"},
                                  out_features=1024))
    return Reference(path, SMALL)


POOLS = [
    ("x = nn.functional.max_pool1d(x.unsqueeze(1), 2).squeeze(1)", "max", 2, 2),
    ("x = F.max_pool1d(x.unsqueeze(1), kernel_size=4, stride=3).squeeze(dim=1)", "max", 4, 3),
    ("x = F.avg_pool1d(x.unsqueeze(1), 3, 2).squeeze(1)", "avg", 3, 2),
    ("x = torch.max_pool1d(x.unsqueeze(1), 5, 1).squeeze(-2)", "max", 5, 1),
]
AFTER_POOL = ["x = torch.sum(x, dim=1)", "x = torch.softmax(F.gelu(x), dim=1)",
              "x = x.mean(1, keepdim=True) * 2.0", "x = torch.logsumexp(x - 0.5, dim=1)"]


@pytest.mark.parametrize("after", AFTER_POOL)
@pytest.mark.parametrize("pool", POOLS, ids=lambda p: f"{p[1]}{p[2]}s{p[3]}")
def test_pooling_traces_and_its_oracle_matches_the_module(pool, after, tmp_path):
    text, op, k, s = pool
    ref = module(tmp_path, f"x = x * 0.5 + self.bias2\n{text}\n{after}")
    graph = check_oracle(ref)
    (p,) = [n for n in graph.nodes if n.kind == "pool"]
    assert (p.op, p.attrs["kernel"], p.attrs["stride"]) == (op, k, s)
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    # The pooled row is computed in the row kernel from S, one window of k taps per column.
    assert low.eval.stage2 == lower.STAGE2_ROWS
    assert f"for (int tap = 0; tap < {k}; ++tap)" in low.eval.stage2_cuda
    assert f"const int n = j * {s} + tap;" in low.eval.stage2_cuda


def test_a_pooled_output_has_the_pooled_width(tmp_path):
    # (of relu(z): a pooling of z itself is the GEMM's, rewrite.pool_as_weight)
    ref = module(tmp_path, "x = torch.relu(x)\nx = F.avg_pool1d(x.unsqueeze(1), 3, 2).squeeze(1)")
    low = lower.lower(trace(ref), fused_stats=True, external_gemm=False)
    assert low.output_level == "pooled"
    width = eval(generator.out_shape(low), {"M": 8, "N": 1024})
    assert width == (8, (1024 - 3) // 2 + 1)


@pytest.mark.parametrize("body, message", [
    ("x = F.max_pool1d(x.unsqueeze(1), 2, padding=1).squeeze(1)", "padding"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2, ceil_mode=True).squeeze(1)", "ceil_mode"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2, dilation=2).squeeze(1)", "dilation"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2).squeeze()", "squeeze"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)\nx = x + self.bias2", "pooled"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)\nx = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)",
     "one pooling"),
    ("x = x.unsqueeze(1) + 1.0", "unsqueeze"),
])
def test_pooling_outside_what_kgen_supports_is_refused(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message) as e:
        trace(module(tmp_path, body))
    assert "line" in str(e.value)


# (body, the extra parameter's shape, the output's shape in the trace)
TAILS = [
    ("x = torch.amin(x, dim=1, keepdim=True)\nx = x + self.extra", "(1, 1024, 1, 1)", (1, 1024, "M", 1)),
    ("x = x.sum(dim=1)\nx = x * self.extra", "(3, 1)", (3, "M")),
    ("x = torch.relu(x) + self.extra", "(2, 1, 1024)", (2, "M", 1024)),
    ("x = torch.softmax(x, dim=1)\nx = torch.tanh(x * self.extra) - self.bias2", "(2, 1, 1, 1024)",
     (2, 1, "M", 1024)),
    ("x = F.avg_pool1d(x.unsqueeze(1), 4).squeeze(1)\nx = x + self.extra", "(5, 1, 256)", (5, "M", 256)),
    ("x = x.mean(dim=1)\nx = x + x.unsqueeze(1) * 0.0 + self.extra * 2.0", "1", None),
    ("x = x.max(dim=1, keepdim=True)[0]\nx = F.gelu(x + self.extra) * self.extra", "(4, 1, 1)",
     (4, "M", 1)),
]


@pytest.mark.parametrize("body, shape, out", TAILS, ids=range(len(TAILS)))
def test_broadcast_tails_trace_and_their_oracle_matches_the_module(body, shape, out, tmp_path):
    if out is None:   # a (batch,) value against a (batch, 1) one: (batch, batch), refused
        with pytest.raises(Unsupported, match=r"\(batch, batch\)"):
            trace(module(tmp_path, body, shape))   # (sizing --out traces it: the refusal comes there)
        return
    ref = module(tmp_path, body, shape)
    graph = check_oracle(ref)
    assert graph.output_level() == "full" and graph.node(graph.output).shape == out
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    assert low.output_shape == out and "struct Tail {" in low.cuda
    expect = tuple(8 if d == "M" else d for d in out)
    assert eval(f"({generator.out_shape(low)})", {"M": 8, "N": 1024}) == expect


def test_the_tail_reads_each_operand_at_its_broadcast_offset(tmp_path):
    # (M, 1) min + (1, N, 1, 1) bias -> (1, N, M, 1): element (0, c, m, 0) is t[m] + bias[c].
    ref = module(tmp_path, "x = torch.amin(x, dim=1, keepdim=True)\nx = x + self.extra", "(1, 1024, 1, 1)")
    low = lower.lower(trace(ref), fused_stats=True, external_gemm=False)
    k = next(i for i, n in enumerate(low.operands) if n.attrs["path"] == "extra")
    assert "const long long i2 = i % M; i /= M;" in low.cuda
    assert "const long long i1 = i;" in low.cuda
    assert "= t[i2];" in low.cuda and f"= kgen::as_float(static_cast<const kgen::Param*>(p.operand[{k}])[i1]);" in low.cuda
    assert "return 1LL * 1024 * M;" in low.cuda


@pytest.mark.parametrize("body, shape, message", [
    ("x = x + self.extra", "(8, 1024)", "batch"),          # a dim that must equal the batch
    ("x = x + self.extra", "(3, 1024)", "batch"),
    ("x = x.sum(dim=1)\nx = x + self.extra", "(2, 3)", "broadcast"),
    ("y = x.sum(dim=1, keepdim=True)\nz = x.max(dim=1, keepdim=True)[0]\nx = y + z * self.extra",
     "(2, 1, 1)", "two values"),
])
def test_broadcasts_kgen_cannot_compute_are_refused(body, shape, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        lower.lower(trace(module(tmp_path, body, shape)), fused_stats=True, external_gemm=False)


def test_symbolic_broadcasting_is_torchs():
    for a, b in [((2, 1, 5), (3, 1)), ((1,), (4, 4)), ((), (2, 3)), ((7, 1, 1), (1, 6))]:
        assert broadcast_shapes(a, b) == tuple(torch.broadcast_shapes(a, b))
    assert broadcast_shapes(("M", 1), (1, 9, 1, 1)) == (1, 9, "M", 1)
    with pytest.raises(ValueError, match="batch"):
        broadcast_shapes(("M", 4), (3, 4))


RENDERED = [
    ("x = torch.amin(F.group_norm(x, 512), dim=1, keepdim=True)\nx = x + self.extra", "(1, 1024, 1, 1)"),
    ("x = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)\nx = torch.sum(x, dim=1) * 0.5", "1"),
    ("x = F.avg_pool1d(x.unsqueeze(1), 3, 2).squeeze(1)\nx = torch.softmax(x, dim=1) + self.extra", "(2, 1, 1)"),
]


def rendered_spec(folder, body: str, shape: str) -> Spec:
    return Spec.of(str(module(folder, body, shape).path), 64, 128, 1024, math="tf32x3", backend="wgmma",
                   fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4))


# (nvcc starts at collection, conftest.nvcc_prefetch: at the tier's end the three ran one after
# the other while the other core idled. The source does not depend on the module's folder.)
@nvcc_prefetch(lambda p: sm90a_check(generator.render_cuda_source(
    rendered_spec(prefetch_dir("pool_tail", p), p["body"], p["shape"]))))
@pytest.mark.parametrize("body, shape", RENDERED, ids=range(len(RENDERED)))
def test_rendered_files_parse_pass_the_static_rules_and_compile(body, shape, tmp_path):
    from test_compile import NVCC, SM90A, compile_check, spills

    spec = rendered_spec(tmp_path, body, shape)
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    report = compile_check(generator.render_cuda_source(spec), (SM90A,))
    assert spills(report) == []


@pytest.mark.parametrize("body, shape, out", [
    ("x = x.amax(dim=1, keepdim=True) + torch.relu(self.extra)", "(3, 1, 1)", (3, "M", 1)),
    ("x = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1) + torch.sigmoid(self.extra)", "(2, 1, 1)",
     (2, "M", 512)),
    ("x = x.sum(dim=1) * (-self.extra)", "(4, 1)", (4, "M")),
])
def test_ops_on_a_parameter_of_another_shape_keep_its_shape(body, shape, out, tmp_path):
    graph = check_oracle(module(tmp_path, body, shape))
    assert graph.node(graph.output).shape == out
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    expect = tuple(8 if d == "M" else d for d in out)
    assert eval(f"({generator.out_shape(low)})", {"M": 8, "N": 1024}) == expect


def test_a_broadcast_tail_checks_the_features_it_was_generated_for(tmp_path):
    ref = module(tmp_path, "x = x.amax(dim=1, keepdim=True) + self.extra", "(2, 1, 1)")
    low = lower.lower(trace(ref), fused_stats=True, external_gemm=False)
    assert "if n != 1024:" in generator.forward_lines([low])


def test_a_negative_zero_constant_keeps_its_sign(tmp_path):
    ref = module(tmp_path, "y = x.sum(dim=1, keepdim=True)\nx = -(y - y)")
    spec = Spec.of(str(ref.path), 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    assert generator.lowered(spec).constant == 0.0 and str(generator.lowered(spec).constant) == "-0.0"
    assert "constexpr float kConstantValue = -0.0f;" in generator.render_cuda_source(spec)
