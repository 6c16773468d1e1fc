"""Chained GEMMs (CPU tier): a module of several GEMMs, each followed by an epilogue chain, traces
to one graph per GEMM part (ir.Graph.previous); the parts' torch oracle computes what the module
computes; the emitted file runs the parts in turn through one entry point each, whose C
prototypes and ctypes signatures agree; nvcc compiles it; and what kgen cannot chain is refused
with the op's line."""

import ast
import copy

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.codegen import generator
from kgen.ir.graph import Unsupported
from kgen.frontend.reference import Reference
from kgen.tune.search import enumerate_specs, predicted_ms
from kgen.tune.spec import Spec, Tile
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace

from conftest import REFS_DIR
from test_render import entry_points_agree, exec_file

_MODULE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, hidden_features, out_features):
        super().__init__()
{init}

    def forward(self, x):
{body}
        return x


batch_size = 8
in_features = 12
hidden_features = 20
out_features = 16


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
'''


def chain_module(tmp_path, init: list[str], body: list[str], name="chain") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(_MODULE.format(init="\n".join(f"        {line}" for line in init),
                                   body="\n".join(f"        {line}" for line in body)))
    return Reference(path)


LINEARS = ["self.linear1 = nn.Linear(in_features, hidden_features)",
           "self.linear2 = nn.Linear(hidden_features, out_features)"]
# name -> (__init__ lines, forward lines, (in, out) features of each GEMM part)
CHAINS = {
    "bn_relu_softmax": (LINEARS + ["self.bn = nn.BatchNorm1d(hidden_features)"],
                        ["x = self.linear1(x)", "x = torch.relu(self.bn(x))", "x = self.linear2(x)",
                         "x = torch.softmax(x, dim=1)"], [(12, 20), (20, 16)]),
    "functional_bn_in_both": (
        ["self.w1 = nn.Parameter(torch.randn(hidden_features, in_features) * 0.3)",
         "self.w2 = nn.Parameter(torch.randn(out_features, hidden_features) * 0.3)",
         "self.b2 = nn.Parameter(torch.randn(out_features))",
         "self.bn1 = nn.BatchNorm1d(hidden_features)", "self.bn2 = nn.BatchNorm1d(out_features)"],
        ["x = F.gelu(self.bn1(x @ self.w1.T))", "x = F.linear(x, self.w2, self.b2)",
         "x = self.bn2(x) * 2.0"], [(12, 20), (20, 16)]),
    "maxpool_between": (["self.linear1 = nn.Linear(in_features, hidden_features)",
                         "self.linear2 = nn.Linear(hidden_features // 2, out_features)"],
                        ["x = self.linear1(x)", "x = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)",
                         "x = torch.tanh(self.linear2(x))"], [(12, 20), (10, 16)]),
    "three_gemms": (LINEARS + ["self.linear3 = nn.Linear(out_features, out_features)"],
                    ["x = torch.sigmoid(self.linear1(x))", "x = self.linear2(x) - 0.5",
                     "x = self.linear3(x)", "x = x.sum(dim=1, keepdim=True)"],
                    [(12, 20), (20, 16), (16, 16)]),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("training", [True, False])
def test_chains_trace_to_parts_whose_oracle_is_the_module(name, training, tmp_path):
    init, body, widths = CHAINS[name]
    ref = chain_module(tmp_path, init, body, name)
    graph = trace(ref)
    assert [(p.in_features, p.out_features) for p in graph.parts] == widths
    assert all([n.kind for n in p.nodes].count("gemm") == 1 for p in graph.parts)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = torch.rand(8, 12, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        expect = model(x)
        got = graph.interpret(x, twin)
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)
    for (buffer, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=buffer)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chained_file_runs_each_part_through_its_own_entry_point(name, tmp_path):
    init, body, widths = CHAINS[name]
    ref = chain_module(tmp_path, init, body, name)
    spec = Spec.of(str(ref.path), 8, 12, 16, math="tf32x3", backend="wgmma", fusion=2,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    module = exec_file(text)
    assert entry_points_agree(module) == len(widths)
    header = ast.get_docstring(ast.parse(text))
    assert f"chain:     {len(widths)} GEMMs" in header
    # forward calls the parts' ops in order, each on the output of the one before.
    forward = text[text.index("class ModelNew"):].splitlines()
    calls = [line.strip() for line in forward if "_kgen_part_call(" in line]
    assert [c.split("_kgen_part_call(")[1].split(",")[0] for c in calls] == [str(k) for k in range(len(widths))]
    assert all(c.split("_kgen_part_call(")[1].startswith(f"{k}, x, w") for k, c in enumerate(calls))
    assert all(c.startswith(("x = ", "x, _ = ", "x, running_mean, running_var = ", "x, _, running_mean, running_var = ",
                             "return ")) for c in calls)
    # (the output handed over as eager's dtype under torch.autocast: _kgen_autocast_output)
    last = forward[-1].strip()
    if last.startswith("return _kgen_autocast_output("):
        last = "return " + last[len("return _kgen_autocast_output("):].rsplit(", weight0, input_dtype, ", 1)[0]
    assert last in ("return x", calls[-1])
    # An inner part's output is the next GEMM's x: (M, its in_features), e.g. pooled to half.
    for k in range(len(widths) - 1):
        assert module._kgen_output_shape(k, 8, widths[k][1]) == (8, widths[k + 1][0])


def test_chain_cost_model_counts_every_gemm():
    ref = str(REFS_DIR / "gemm_sigmoid_gemm_lse.py")
    spec = next(s for s in enumerate_specs(ref, 16384, 2048, 1024) if s.family == "wgmma")
    alone = Spec.of(str(REFS_DIR / "gemm_mul_leakyrelu.py"), 16384, 2048, 4096, math=spec.math,
                    backend=spec.backend, fusion=spec.fusion, tile=spec.tile)
    second = Spec.of(str(REFS_DIR / "gemm_mul_leakyrelu.py"), 16384, 4096, 1024, math=spec.math,
                     backend=spec.backend, fusion=spec.fusion, tile=spec.tile)
    assert predicted_ms(spec, 132) == pytest.approx(predicted_ms(alone, 132) + predicted_ms(second, 132))
    # No matrix-vector rewrite for a chain's last part, and the row reduction is its own stage.
    assert all(s.family != "gemv" for s in enumerate_specs(ref, 64, 128, 1024))


def test_chained_epilogues_compile(tmp_path):
    from test_compile import NVCC, SM90A, compile_check, spills

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    init, body, _ = CHAINS["functional_bn_in_both"]
    ref = chain_module(tmp_path, init, body, "functional_bn_in_both")
    spec = Spec.of(str(ref.path), 64, 12, 16, math="tf32x3", backend="wgmma", fusion=2,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    report = compile_check(generator.render_cuda_source(spec), (SM90A,))
    assert spills(report) == []


REFUSALS = {
    # two GEMMs of the module's input of different widths: not a chain, and not Linears side by
    # side (one GEMM of equal halves)
    "parallel": (LINEARS[:1] + ["self.linear2 = nn.Linear(in_features, out_features)"],
                 ["y = self.linear1(x)", "x = self.linear2(x)", "x = x + y.sum(dim=1, keepdim=True)"],
                 "Linears of the module's input side by side of different widths"),
    # a value of the first part used after the second GEMM
    "residual_across": (["self.linear1 = nn.Linear(in_features, hidden_features)",
                         "self.linear2 = nn.Linear(hidden_features, hidden_features)"],
                        ["h = torch.relu(self.linear1(x))", "x = self.linear2(h) + h"],
                        "computed before the GEMM at line \\d+ is used after it"),
    # a GEMM of a row reduction
    "gemm_of_row": (LINEARS[:1] + ["self.linear2 = nn.Linear(1, out_features)"],
                    ["x = self.linear1(x).sum(dim=1, keepdim=True)", "x = self.linear2(x)"],
                    "second GEMM is a value of shape \\(batch, 1\\)"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_what_kgen_cannot_chain_is_refused(name, tmp_path):
    init, body, message = REFUSALS[name]
    ref = chain_module(tmp_path, init, body, name)
    with pytest.raises(Unsupported, match=message):
        trace(ref)
    # In process (click's runner; tests/test_ir.py runs the real command line's refusals): exit 2
    # from kgen's own message, not from an exception escaping it (which would be exit 1 here and
    # a traceback on the command line).
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), f"{r.output}\n{r.exception!r}"
    assert "line " in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "new.py").exists()
