"""The IR rewrites (kgen/ir/rewrite.py): the exact ones compute bit for bit what the traced graph
computes; the matrix-vector rewrite's algebra holds (in fp64) and applies only where it may."""

import copy
import itertools
import math

import pytest
import torch

from kgen.lower import forward as lower
from kgen.ir import rewrite
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace

from conftest import module_source



def traced(tmp_path, body: str):
    path = tmp_path / "m.py"
    path.write_text(module_source(body, {"scale": "nn.Parameter(torch.randn(out_features))"},
                                  out_features=32, gemm="linear"))
    ref = Reference(path)
    return ref, trace(ref)


def run(ref, graph, dtype, seed=0):
    torch.manual_seed(seed)
    model = ref.Model(*ref.init_args()).to(dtype)
    x = (torch.rand(8, 16, dtype=dtype) * 4 - 2)
    with torch.no_grad():
        return graph.interpret(x, model), model(x)


EXACT = {
    "width-1 reductions": "        x = x.sum(dim=1, keepdim=True)\n        x = x.max(dim=1, keepdim=True)[0]\n"
                          "        x = x.mean(dim=1, keepdim=True)\n        x = torch.logsumexp(x, dim=1, keepdim=True)\n"
                          "        x = torch.amin(x, dim=1)",
    "x + x": "        x = torch.relu(x)\n        x = x + x",
    "clamps": "        x = torch.clamp(x, -1.0, 2.0)\n        x = F.hardtanh(x, -0.5, 0.5)\n        x = torch.clamp(x, min=0.25)",
    "softmax of width 1": "        x = x.amax(dim=1, keepdim=True)\n        x = torch.softmax(x, dim=1)",
}


@pytest.mark.parametrize("name", EXACT)
def test_exact_rewrites_are_bit_exact_in_fp32(tmp_path, name):
    ref, graph = traced(tmp_path, EXACT[name])
    simple, applied = rewrite.simplify(graph)
    assert applied, "the rewrite did not apply"
    assert len(simple.live()) < len(graph.live()) or name == "x + x"
    for seed in range(3):
        before, module = run(ref, graph, torch.float32, seed)
        after, _ = run(ref, simple, torch.float32, seed)
        assert torch.equal(before, after), name
        assert torch.equal(before, module), name


def test_nothing_to_rewrite_leaves_the_graph_alone(tmp_path):
    _, graph = traced(tmp_path, "        x = torch.relu(x) * self.scale")
    assert rewrite.simplify(graph) == (graph, [])


BOUNDS = [None, -2.0, -0.5, 0.0, 0.5, 2.0]


def test_merged_clamp_equals_two_clamps():
    x = torch.linspace(-3, 3, 601, dtype=torch.float64)
    checked = 0
    for l1, h1, l2, h2 in itertools.product(BOUNDS, repeat=4):
        if (l1 is None and h1 is None) or (l2 is None and h2 is None):
            continue
        merged = rewrite.merge_clamps((l1, h1), (l2, h2))
        if merged is None:
            continue
        two = torch.clamp(torch.clamp(x, l1, h1), l2, h2)
        lo, hi = merged
        one = torch.clamp(x, lo, hi) if (lo is not None or hi is not None) else x
        assert torch.equal(one, two), (l1, h1, l2, h2, merged)
        checked += 1
    assert checked > 500


@pytest.mark.parametrize("body, applies", [
    ("        x = x.sum(dim=1, keepdim=True)", True),
    ("        x = (x * self.scale - 3.0).mean(dim=1)", True),
    ("        x = (2.0 - x / 4.0).sum(dim=1, keepdim=True)\n        x = torch.sigmoid(x)", True),
    ("        x = torch.relu(x).sum(dim=1, keepdim=True)", False),       # not affine
    ("        x = x.amax(dim=1, keepdim=True)", False),                  # not linear
    ("        y = x.sum(dim=1, keepdim=True)\n        x = x - y", False),  # z used again
])
def test_row_sum_as_gemv_applies_to_affine_sums_only(tmp_path, body, applies):
    _, graph = traced(tmp_path, body)
    assert (rewrite.row_sum_of_gemm(rewrite.simplify(graph)[0]) is not None) == applies


@pytest.mark.parametrize("body", [
    "        x = (x * self.scale - 3.0).mean(dim=1)",
    "        x = (2.0 - x / 4.0).sum(dim=1, keepdim=True)\n        x = torch.sigmoid(x)",
])
def test_row_sum_as_gemv_algebra_in_fp64(tmp_path, body):
    """x . (sum_n scale_n W_n) + sum_n shift_n, with scale and shift from the affine steps the
    kernels read (ir.affine_chain), is the reduction the module computes."""
    ref, graph = traced(tmp_path, body)
    graph = rewrite.simplify(graph)[0]
    found = rewrite.row_sum_of_gemm(graph)
    torch.manual_seed(1)
    model = ref.Model(*ref.init_args()).double()
    x = torch.rand(8, 16, dtype=torch.float64)
    n = model.linear.weight.shape[0]
    scale, shift = torch.ones(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    for step in found.steps:
        other = [a for a in step.args if graph.node(a).level != "tile"]
        o = graph.interpret_value(other[0], x, model) if other else None
        tile_first = graph.node(step.args[0]).level == "tile"
        if step.op == "add":
            shift = shift + o
        elif step.op == "sub":
            scale, shift = (scale, shift - o) if tile_first else (-scale, o - shift)
        elif step.op == "mul":
            scale, shift = scale * o, shift * o
        elif step.op == "div":
            scale, shift = scale / o, shift / o
    total = x @ (scale[:, None] * model.linear.weight).sum(0) + shift.sum()
    if found.reduce.op == "mean":
        total = total / n
    reduced = graph.interpret_value(found.reduce.id, x, model)
    torch.testing.assert_close(total, reduced.reshape(-1), rtol=1e-12, atol=1e-12)



def test_x_minus_x_is_zero_and_the_module_runs_no_gemm(tmp_path):
    # KernelBench 80: max over the features, minus the mean of that width-1 value, GELU: 0.
    ref, graph = traced(tmp_path, "        x = torch.max(x, dim=1, keepdim=True).values\n"
                                  "        x = x - x.mean(dim=1, keepdim=True)\n"
                                  "        x = torch.nn.functional.gelu(x)")
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    # (The Linear's bias is read only for torch's NaN: test_constant_output_keeps_torchs_nan.)
    assert low.constant == 0.0 and [n.attrs["path"] for n in low.operands] == ["linear.bias"]
    assert low.output_level == "row"
    assert any("x - x is 0" in r for r in low.rewrites)
    assert "no GEMM" in " ".join(low.summary())
    _, module = run(ref, graph, torch.float32)
    assert torch.equal(module, torch.zeros_like(module))   # what the module computes


def test_ops_after_x_minus_x_fold_in_fp32(tmp_path):
    ref, graph = traced(tmp_path, "        x = x.sum(dim=1, keepdim=True)\n"
                                  "        x = torch.exp((x - x) + 0.1) * 3.0")
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    _, module = run(ref, graph, torch.float32)
    assert torch.all(module == low.constant)   # bit for bit what torch computes in fp32
    assert module.dtype == torch.float32 and low.constant != float((2.718281828459045 ** 0.1) * 3.0)


def test_x_minus_x_of_a_value_with_other_uses_keeps_them(tmp_path):
    ref, graph = traced(tmp_path, "        x = torch.relu(x) + (x - x)")
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    assert low.constant is None
    simple, _ = rewrite.simplify(graph)
    for seed in range(2):
        after, module = run(ref, simple, torch.float32, seed)
        assert torch.equal(after, module)


@pytest.mark.parametrize("name, expected", [("softmax of width 1", 1.0), ("width-1 reductions", None)])
def test_width_1_softmax_and_logsumexp_fold_whole(tmp_path, name, expected):
    """Over a width-1 value softmax is 1 and logsumexp the value itself: the rewrites fold
    x - max(x) away (softmax's and logsumexp's max is detached only over wider rows, where no
    rewrite needs to see it), so no exp or log is left to compute."""
    _, graph = traced(tmp_path, EXACT[name])
    simple, _ = rewrite.simplify(graph)
    live = simple.live()
    assert not any(n.kind == "pointwise" and n.op in ("exp", "log", "detach") for n in live)
    if expected is not None:
        assert simple.node(simple.output).kind == "const" and simple.node(simple.output).attrs["value"] == expected


# Constant outputs (x - x and the ops after it) and what torch gives where the chain x - x
# dropped reads a NaN or an infinity: (body, the constant, the value there, reads the GEMM).
NONFINITE = {
    "max - mean, gelu (KernelBench 80)": ("        x = torch.max(x, dim=1, keepdim=True).values\n"
                                          "        x = x - x.mean(dim=1, keepdim=True)\n"
                                          "        x = torch.nn.functional.gelu(x)", 0.0, "nan", True),
    "sum, exp((x - x) + 0.1) * 3": ("        x = x.sum(dim=1, keepdim=True)\n"
                                    "        x = torch.exp((x - x) + 0.1) * 3.0", None, "nan", True),
    "x - x of the tile, times a scale": ("        y = x * self.scale\n        x = torch.relu(y - y)", 0.0, "nan", True),
    "pow(x - x, 0) is 1 even for NaN": ("        x = x.amax(dim=1, keepdim=True)\n"
                                        "        x = torch.pow(x - x, 0.0)", 1.0, None, False),
    "softmax of width 1": ("        x = x.amax(dim=1, keepdim=True)\n        x = torch.softmax(x, dim=1)", 1.0,
                           "nan", True),
}


def _poisoned(model, x, case: str):
    """x and model with NaN / Inf where `case` says (a fresh copy of each)."""
    x = x.clone()
    model = copy.deepcopy(model)
    with torch.no_grad():
        if case == "rows":
            x[1, 3], x[4, 0], x[6, -1] = float("nan"), float("inf"), float("-inf")
        elif case == "weight":
            model.linear.weight[5, 7] = float("nan")
        elif case == "bias":
            model.linear.bias[2] = float("nan")
        elif case == "scale":
            model.scale[0] = float("nan")
        elif case == "inf bias":
            model.linear.bias[2] = float("inf")
    return model, x


@pytest.mark.parametrize("name", NONFINITE)
def test_constant_output_keeps_torchs_nan(tmp_path, name):
    """The constant output is torch's where what x - x dropped reads NaN or Inf: in the rows of
    x that hold one, everywhere where W or a parameter the chain read does; elsewhere the
    constant. The graph's interpreter runs the kernels' rule (Graph.constant_nonfinite): its
    output equals the module's, NaN for NaN, on each poisoned input and parameter."""
    body, constant, nonfinite, reads_gemm = NONFINITE[name]
    ref, graph = traced(tmp_path, body)
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    assert low.constant is not None and (constant is None or low.constant == constant)
    out = low.graph.node(low.graph.output)
    assert out.attrs.get("reads_gemm", False) == reads_gemm
    assert ("nonfinite" in out.attrs) == (nonfinite is not None)
    reads = [n.attrs["path"] for n in low.operands]
    if nonfinite is not None:
        assert math.isnan(out.attrs["nonfinite"])
        assert reads == sorted(out.attrs["reads"]) and "linear.bias" in reads
        struct = lower.constant_reads_struct(low.graph, out, {p: k for k, p in enumerate(reads)})
        assert "kAny = true" in struct and "kNonFiniteValue = NAN" in struct
    else:
        assert reads == [] and "kAny = false" in low.cuda.split("struct ConstantReads")[1]
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args())
    x = torch.rand(8, 16) * 4 - 2
    cases = ["clean", "rows", "weight", "bias", "inf bias"] + (["scale"] if "scale" in body else [])
    for case in cases:
        m, xx = _poisoned(model, x, case)
        with torch.no_grad():
            expected, got = m(xx), low.graph.interpret(xx, m)
        assert expected.shape == got.shape, case
        if out.level == "tile" and case not in ("clean", "rows"):
            # Known: a non-finite parameter or row of W makes torch's x - x NaN in its column
            # only; the kernels flag rows and everything, not columns (docs/design.md).
            assert torch.isnan(got).all() and torch.isnan(expected).any(dim=0).sum() == 1, case
            continue
        assert torch.equal(torch.isnan(expected), torch.isnan(got)), (case, expected, got)
        assert torch.equal(expected.nan_to_num(), got.nan_to_num()), case
        if case != "clean" and nonfinite is not None:
            assert torch.isnan(expected).any(), case   # (the case poisons what the chain reads)
