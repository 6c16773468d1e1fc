"""(W @ x.T).T, the Linear's GEMM written as its transpose transposed back (CPU): taken in every
spelling of the transposes (.T, .mT, .t(), torch.t, transpose(0, 1), permute(1, 0)), of a weight
stored (N, K) or (K, N) (W.t() @ x.T), for the first GEMM and for a chained one; the IR computes
what the module computes, its gradients autograd's. A transposed activation used any other way is
refused, saying what kgen takes; an input of more dimensions (whose .T is no matrix's) is refused."""

import copy

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

from test_kernelbench_corpus import needs_corpus

MODULE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / 6)
        self.weight_kn = nn.Parameter(torch.randn(in_features, out_features) / 6)
        self.second = nn.Parameter(torch.randn(out_features, out_features) / 7)
        self.bias = nn.Parameter(torch.randn(out_features))
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return BODY


def get_inputs():
    return [torch.randn(SHAPE)]


def get_init_inputs():
    return [32, 48]
'''

TAKEN = [
    "(self.weight @ x.T).T + self.bias",
    "torch.matmul(self.weight, x.t()).t()",
    "torch.mm(self.weight, torch.t(x)).transpose(0, 1).relu()",
    "(self.weight @ x.permute(1, 0)).mT * 2",
    "torch.transpose(torch.mm(self.weight, x.T), 0, 1) - self.bias",
    "(self.weight_kn.t() @ x.T).T",
    "torch.sigmoid((self.second @ torch.relu(x @ self.weight.T).T).T)",
]
REFUSED = {
    "(self.weight @ x.T).sum(0)": "a transposed activation \\(x.T\\) used other than as W @ x.T transposed back",
    "torch.relu(x.T).T @ self.weight.T": "a transposed activation \\(x.T\\) used other than as W @ x.T transposed back",
    "x.T @ self.weight_kn.T": "a transposed activation",
}


def reference(tmp_path, body: str, shape: str = "8, 32") -> Reference:
    path = tmp_path / "transposed.py"
    path.write_text(MODULE.replace("BODY", body).replace("SHAPE", shape))
    return Reference(str(path))


@pytest.mark.parametrize("body", TAKEN)
def test_the_transposed_gemm_computes_what_the_module_computes(body, tmp_path):
    assert_computes_the_module(reference(tmp_path, body))


def test_the_transposed_gemm_is_the_linears_gemm(tmp_path):
    """(W @ x.T).T + b traces to the IR of x @ W.T + b, node for node."""
    def described(body):
        return trace(reference(tmp_path, body)).describe().replace(body, "")
    assert described("(self.weight @ x.T).T + self.bias") == described("x @ self.weight.T + self.bias")


@pytest.mark.parametrize("body, message", REFUSED.items())
def test_a_transposed_activation_used_otherwise_is_refused(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        trace(reference(tmp_path, body))


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors of dimension other than 2")
def test_an_input_of_more_dimensions_is_not_transposed_as_a_matrix(tmp_path):
    with pytest.raises(Unsupported, match="attribute .T is not supported"):
        trace(reference(tmp_path, "(self.weight @ x.T).T", shape="2, 8, 32"))


def forward_reference(tmp_path, lines: str) -> Reference:
    """MODULE with a forward of several lines (`lines`, one statement a line)."""
    body = "\n        ".join(lines.strip().splitlines())
    path = tmp_path / "transposed_lines.py"
    path.write_text(MODULE.replace("return BODY", body).replace("SHAPE", "8, 32"))
    return Reference(str(path))


def assert_computes_the_module(ref: Reference) -> None:
    """The traced graph's output and gradients are the module's (fp64)."""
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.randn(8, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), model(x.clone()), rtol=1e-12, atol=1e-12)
    xg = x.clone().requires_grad_()
    y = model(xg)
    gy = torch.randn_like(y)
    params = dict(model.named_parameters())
    expect = torch.autograd.grad(y, [xg, *params.values()], gy, allow_unused=True)
    with torch.no_grad():
        gx, grads = graph_vjp(graph, x, copy.deepcopy(model), gy)
    for name, got, e in [("x", gx, expect[0]), *((n, grads.get(n), e) for n, e in zip(params, expect[1:]))]:
        if e is None:
            assert got is None or not got.any(), name
        else:
            torch.testing.assert_close(got, e, rtol=1e-10, atol=1e-12, msg=name)


# x.T is a view of x: an in-place op on either is seen by the other, as in torch; under no_grad
# it carries no gradient (fx makes an attribute's node where it is used, after the block).
TAKEN_LINES = {
    "in place on the GEMM's value": "out = (self.weight @ x.T).T\nout.relu_()\nreturn out",
    "in place, the transposed view not read again": "z = self.weight @ x.T\nzt = z.T\nzt.relu_()\nreturn zt",
    "a value's transpose under no_grad (.T)": "y = self.fc(x)\nwith torch.no_grad():\n    yt = y.T\nreturn (self.second @ yt).T + self.bias",
    "a value's transpose under no_grad (.t())": "y = self.fc(x)\nwith torch.no_grad():\n    yt = y.t()\nreturn (self.second @ yt).T",
}
REFUSED_LINES = {
    # eager: yt sees the write (a view), where y.t().contiguous() would not (a copy)
    "y.t() read after y.mul_(2)": ("y = self.fc(x)\nyt = y.t()\ny.mul_(2)\nreturn (self.second @ yt).T",
                                   "an in-place op on a value whose transpose"),
    "z read after z.T.relu_()": ("z = self.weight @ x.T\nzt = z.T\nzt.relu_()\nreturn z.T",
                                 "an in-place op on a value whose transpose"),
    # yt of the part the second GEMM closed: out of reach, as y is (it read another part's node)
    "y.t() read after the next GEMM": ("y = self.fc(x)\nyt = y.t()\na = torch.relu((self.second @ yt).T + self.bias) * 3 - 1\n"
                                       "return a + yt.T", "the attribute .T is not supported"),
    "x.T under no_grad": ("with torch.no_grad():\n    xt = x.T\nreturn (self.weight @ xt).T", "a detached copy of the module's input"),
    "a weight's .T under no_grad": ("with torch.no_grad():\n    w = self.weight.T\nreturn x @ w", "computed under torch.no_grad"),
}


@pytest.mark.parametrize("lines", TAKEN_LINES.values(), ids=TAKEN_LINES)
def test_a_transposed_view_computes_what_the_module_computes(lines, tmp_path):
    assert_computes_the_module(forward_reference(tmp_path, lines))


@pytest.mark.parametrize("lines, message", REFUSED_LINES.values(), ids=REFUSED_LINES)
def test_a_transposed_view_kgen_cannot_follow_is_refused(lines, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        trace(forward_reference(tmp_path, lines))


@needs_corpus
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_transposed_gemms_file_passes_kernelbenchs_static_checker(dtype, tmp_path):
    """`kgen generate` writes the file of a (W @ x.T).T module, chained, and KernelBench's own
    static checker accepts it at the precision asked for."""
    from click.testing import CliRunner

    from kgen.cli import main
    from test_kernelbench_corpus import kernelbench_checker

    ref = reference(tmp_path, TAKEN[-1])
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "--dtype", dtype, "-o", str(out), "--force"])
    assert r.exit_code == 0, r.output
    valid, errors, _ = kernelbench_checker()(out.read_text(), backend="cuda", precision=dtype)
    assert valid, errors
