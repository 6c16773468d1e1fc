"""A GEMM weight the forward computes from the module's parameters: F.linear(x, self.weight *
self.scale) (an equalized learning rate), a cosine classifier's F.normalize(self.prototypes),
weight standardization, a low-rank product self.u @ self.v, a per-row gain. The trace keeps the
computation as torch.fx's Python for the subgraph (Tracer._weight_expression); the emitted file
runs it in a method of ModelNew (torch's own ops, so autograd carries the GEMM's weight gradient
to the parameters) and hands the result to the kernels; the IR's oracle runs the same code.

CPU: each spelling traces to a GEMM of a computed weight; the oracle equals the module in fp64
(training and eval); the emitted file's method gives the weight the reference computes (bit for
bit: the same ops) and the forward calls it once; the IR of a view of a parameter (x @ W.t(),
an (N, 1) bias's .t()) is unchanged. GPU: docs/experiments/device_session17_weights.sh.
"""

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import gemm_weight

from test_ir import check_oracle

HEAD = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))
        self.u = nn.Parameter(torch.randn(out_features, 4))
        self.v = nn.Parameter(torch.randn(4, in_features))
        self.a = nn.Parameter(torch.randn(in_features, 4))
        self.b = nn.Parameter(torch.randn(4, out_features))
        self.gain = nn.Parameter(torch.rand(out_features) + 0.5)
        self.scale = (1.0 / in_features) ** 0.5

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""

SPELLINGS = {
    # (the input's width is the weight's: a number while kgen traces, session 19)
    "input_width": "return F.linear(x, self.weight / x.size(1) ** 0.5)",
    "equalized_lr": "return F.leaky_relu(F.linear(x, self.weight * self.scale, self.bias), 0.2)",
    "transposed_product": "return torch.relu(x @ (self.weight * self.scale).t() + self.bias)",
    "cosine": "w = F.normalize(self.weight, dim=1)\n        return 10.0 * F.linear(x, w)",
    "row_norm_T": "return torch.tanh(x @ (self.weight / self.weight.norm(dim=1, keepdim=True)).T)",
    "standardized": ("w = (self.weight - self.weight.mean(dim=1, keepdim=True)) / "
                     "(self.weight.std(dim=1, keepdim=True) + 1e-5)\n        return torch.sigmoid(F.linear(x, w, self.bias))"),
    "low_rank_nk": "return F.gelu(F.linear(x, self.u @ self.v))",
    "low_rank_kn": "return torch.matmul(x, self.a @ self.b) + self.bias",
    "row_gain": "return F.linear(x, self.weight * self.gain.unsqueeze(1), self.bias)",
    "einsum_nk": "return torch.einsum('bk,nk->bn', x, self.weight * self.scale) + self.bias",
    "einsum_kn": "return torch.relu(torch.einsum('bk,kn->bn', x, self.a @ self.b))",
    "addmm": "return torch.addmm(self.bias, x, (self.weight * self.scale).t())",
}


def reference(tmp_path, name: str) -> Reference:
    path = tmp_path / f"weight_{name}.py"
    path.write_text(HEAD.format(body=SPELLINGS[name]))
    return Reference(path)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_a_computed_weight_traces_and_the_oracle_is_the_module(name, training, tmp_path):
    graph = check_oracle(reference(tmp_path, name), training)
    assert graph.gemm.attrs.get("weight_code"), graph.describe()


@pytest.mark.parametrize("name", ["equalized_lr", "cosine", "low_rank_kn", "row_norm_T"])
def test_the_files_method_computes_the_references_weight(name, tmp_path):
    ref = reference(tmp_path, name)
    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    forward = text.split("    def forward(self, x):")[-1]
    assert forward.count("self._kgen_weight0()") == 1
    assert [line for line in forward.splitlines() if "self.weight" in line and "`" not in line] == []
    namespace = {"__name__": "kgen_weight_test"}
    exec(compile(text, str(out), "exec"), namespace)
    torch.manual_seed(0)
    new = namespace["ModelNew"](*ref.init_args())
    graph = trace(ref)
    expect = gemm_weight(new, graph.gemm)
    got = new._kgen_weight0()
    assert got.is_contiguous() and got.shape == (24, 16)
    assert torch.equal(got, expect)
    # autograd reaches the parameters through the method
    got.sum().backward()
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in new.parameters())


def test_views_of_a_parameter_stay_the_plain_gemm_and_epilogue(tmp_path):
    """x @ W.t() + b.t() of an (N, 1) b: the weight is the module's tensor, the bias a
    per-feature value (the computed-weight path takes matrices with no dimension of 1 only)."""
    path = tmp_path / "plain.py"
    path.write_text(HEAD.format(body="return torch.relu(x @ self.weight.t() + self.gain.unsqueeze(1).t() * 2.0)"))
    graph = check_oracle(Reference(path))
    assert graph.gemm.attrs["weight"] == "weight" and not graph.gemm.attrs.get("weight_code")


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_the_oracles_gradients_reach_the_parameters(name, training, tmp_path):
    """autodiff.graph_vjp takes dW through the weight's own code to the parameters it reads:
    torch.autograd's gradients of the module, parameter by parameter."""
    from test_autodiff import check_module_gradients

    check_module_gradients(reference(tmp_path, name), training)


REFUSED = {
    # a weight that follows the mode: the modes' IRs differ (Graph.describe holds the code)
    "mode": ("return F.linear(x, self.weight * 2.0 if self.training else self.weight * 3.0)",
             "other ops in training mode than in eval mode"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_weights_kgen_cannot_compute_once_are_refused(name, tmp_path):
    from kgen.ir.graph import Unsupported

    body, message = REFUSED[name]
    path = tmp_path / f"refused_{name}.py"
    path.write_text(HEAD.format(body=body))
    with pytest.raises(Unsupported, match=message):
        trace(Reference(path))


@pytest.mark.parametrize("body", ["return F.linear(x, self.weight.contiguous(), self.bias)",
                                  "return F.linear(x, self.weight.clone(), self.bias)"])
def test_the_weight_itself_is_not_a_computed_weight(body, tmp_path):
    """W.contiguous() / W.clone() are W: the plain GEMM of the stored weight, as before."""
    path = tmp_path / "itself.py"
    path.write_text(HEAD.format(body=body))
    graph = trace(Reference(path))
    assert graph.gemm.attrs["weight"] == "weight" and not graph.gemm.attrs.get("weight_code")


def test_a_dropout_of_the_weight_is_not_a_computed_weight(tmp_path):
    """A dropout draws a mask, which kgen does not compute once per forward: as before weights
    could be computed, the GEMM reads the stored weight (a dropout's identity in eval mode) and
    the dropout is recorded as one kgen does not reproduce (the emitted forward refuses training
    mode, naming it)."""
    path = tmp_path / "dropout.py"
    path.write_text(HEAD.format(body="return F.linear(x, F.dropout(self.weight, 0.5, self.training), self.bias)"))
    graph = trace(Reference(path))
    assert graph.gemm.attrs["weight"] == "weight" and not graph.gemm.attrs.get("weight_code")
    assert [(d["p"], d["reproduced"]) for d in graph.dropouts] == [(0.5, False)]


def test_infinity_in_a_weights_code_is_defined_in_the_method(tmp_path):
    """torch.fx writes float('-inf') as a global `inf`: the method defines it."""
    path = tmp_path / "inf.py"
    path.write_text(HEAD.format(body="return F.linear(x, torch.clamp(self.weight, -float('inf'), 1.0), self.bias)"))
    graph = check_oracle(Reference(path))
    assert "inf = float('inf')" in graph.gemm.attrs["weight_code"]
