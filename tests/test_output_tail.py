"""torch's own last op on the kernel's output (Graph.output_tail): a reduction over every element
(x.sum(), torch.mean(x), x.max(), torch.amin(x), x.sum(dim=1).sum(), ...) and squeeze() with no
dim, each taken only as the forward's last op. The kernel computes the per-row values (the row's
reduction over the features, or the per-row value itself); the emitted forward and the IR's oracle
then call torch's method on them, so a batch of 1 gives the 0-d tensor torch gives.

CPU: each spelling traces to the row values and the tail; the oracle equals the module in fp64
(training and eval; tests/test_ir.check_oracle), at the traced batch and at a batch of 1; the
emitted forward ends in the method's call; uses other than as the last op are refused by name.
The GPU runs of such files: docs/experiments/device_session17_tails.sh.
"""

import copy

import re

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_ir import SMALL, check_oracle

HEAD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = torch.tanh(self.fc(x))
        {body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""

# spelling -> (the forward's last lines, the tail's method, the kernel output's level)
TAILS = {
    "sum_method": ("return x.sum()", "sum", "rowflat"),
    "sum_function": ("return torch.sum(x)", "sum", "rowflat"),
    "mean_method": ("return x.mean()", "mean", "rowflat"),
    "mean_function": ("x = torch.mean(x)\n        return x", "mean", "rowflat"),
    "max_method": ("return x.max()", "amax", "rowflat"),
    "max_function": ("return torch.max(x)", "amax", "rowflat"),
    "amax": ("return x.amax()", "amax", "rowflat"),
    "amin_function": ("return torch.amin(x)", "amin", "rowflat"),
    "min_method": ("return x.min()", "amin", "rowflat"),
    "of_row_sums": ("return x.sum(dim=1).sum()", "sum", "rowflat"),
    "of_row_means_kept": ("return x.mean(1, keepdim=True).mean()", "mean", "row"),
    "squeeze_of_row_mean": ("return x.mean(dim=-1, keepdim=True).squeeze()", "squeeze", "rowflat"),
}
REFUSED = {
    "sum_then_scaled": ("return x.sum() * 2.0", "sum over every element (dim=None) other than as the module's output"),
    "keepdim": ("return x.sum(dim=None, keepdim=True)", "with keepdim=True"),
    "squeeze_then_sigmoid": ("return torch.sigmoid(x.mean(1, keepdim=True).squeeze())",
                             "squeeze() as the forward's last op"),
}


def reference(tmp_path, name: str, body: str) -> Reference:
    path = tmp_path / f"tail_{name}.py"
    path.write_text(HEAD.format(body=body))
    return Reference(path)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(TAILS))
def test_a_tail_traces_to_the_row_values_and_the_oracle_is_the_module(name, training, tmp_path):
    body, method, level = TAILS[name]
    ref = reference(tmp_path, name, body)
    graph = check_oracle(ref, training)
    assert graph.output_tail[0] == method and graph.output_level() == level
    assert graph.describe().endswith(f".{method}()")
    # a batch of 1: torch's squeeze() makes the output 0-d, and the oracle follows it
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = torch.rand(1, SMALL["in_features"], dtype=torch.float64)
    with torch.no_grad():
        expect, got = model(x), graph.interpret(x, twin)
    assert got.shape == expect.shape == ()
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["sum_method", "squeeze_of_row_mean", "max_function"])
def test_the_emitted_forward_ends_in_torchs_method(name, tmp_path):
    body, method, _ = TAILS[name]
    forward = emitted_forward_returning(tmp_path, reference(tmp_path, name, body), f"x.{method}()")
    assert "line 12 of the reference" in forward


def emitted_forward_returning(tmp_path, ref: Reference, call: str) -> str:
    """The forward of the file `kgen generate` writes for ref, asserted to end in `return <call>`
    (a file with 16-bit builds hands it over in eager's dtype under torch.autocast)."""
    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    forward = out.read_text().split("    def forward(self, x):")[-1]
    last = forward.rstrip().splitlines()[-1].strip()
    # (a sum / mean of everything rounded to the module's dtype outside torch.autocast: Graph.tail_rounds)
    rounded = rf"{re.escape(call)}(\.to\(x\.dtype if autocast else weight0\.dtype\))?"
    assert last == f"return {call}" or re.fullmatch(
        rf"return _kgen_autocast_output\({rounded}, weight0, input_dtype, \(.*\)\)", last), last
    return forward


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_other_uses_are_refused_by_name(name, tmp_path):
    body, message = REFUSED[name]
    with pytest.raises(Unsupported, match=message.replace("(", r"\(").replace(")", r"\)")):
        trace(reference(tmp_path, name, body))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(TAILS))
def test_the_oracles_gradients_go_through_the_tail(name, training, tmp_path):
    """autodiff.graph_vjp takes the output gradient through torch's tail op (autograd):
    torch.autograd's gradients of the module."""
    from test_autodiff import check_module_gradients

    body, _, _ = TAILS[name]
    check_module_gradients(reference(tmp_path, name, body), training)


# A view of the module's output to a shape kgen's values do not take, as its last op (session 56:
# each was refused, the container ones as "something other than one tensor"): spelling -> (the
# forward's last line, the emitted call on the kernel's output x, the kernel output's level).
VIEWS = {
    "view_flat": ("return x.view(-1)", "x.view(-1)", "tile"),
    "flatten_all": ("return x.flatten()", "x.flatten(0, -1)", "tile"),
    "flatten_by_keyword": ("return torch.flatten(x, start_dim=0)", "x.flatten(0, -1)", "tile"),
    "reshape_flat": ("return torch.reshape(x, (-1,))", "x.reshape(-1)", "tile"),
    "view_3d": ("return x.view(x.size(0), -1, 6)", "x.reshape(x.shape[0], -1, 6)", "tile"),
    "reshape_3d_by_shape": ("return x.reshape(x.shape[0], 4, 6)", "x.reshape(x.shape[0], -1, 6)", "tile"),
    "view_4d": ("return x.view(-1, 2, 3, 4)", "x.view(-1, 2, 3, 4)", "tile"),
    "view_size_keyword": ("return x.view(size=(x.size(0), -1, 4))", "x.reshape(x.shape[0], -1, 4)", "tile"),
    "view_size_keyword_flat": ("return x.view(size=(-1,))", "x.view(-1)", "tile"),
    # sizes as numbers: the reference's own call on a value of the same shape, at every batch
    "view_by_numbers": ("return x.view(2, -1)", "x.view(2, -1)", "tile"),
    "unsqueeze_1": ("return x.unsqueeze(1)", "x.unsqueeze(1)", "tile"),
    "none_index": ("return x[:, None, :]", "x.unsqueeze(1)", "tile"),
    "unsqueeze_last": ("return x.unsqueeze(-1)", "x.unsqueeze(-1)", "tile"),
    "unsqueeze_0": ("return torch.unsqueeze(x, 0)", "x.unsqueeze(0)", "tile"),
    "row_sums_unsqueeze_0": ("return x.sum(dim=1).unsqueeze(0)", "x.unsqueeze(0)", "rowflat"),
    "row_sums_squeeze": ("return x.sum(dim=1).squeeze()", "x.squeeze()", "rowflat"),
    "row_means_squeeze_0": ("return torch.squeeze(x.mean(-1), 0)", "x.squeeze()", "rowflat"),
}
VIEWS_REFUSED = {
    "view_then_sigmoid": ("return torch.sigmoid(x.view(-1))", "kgen keeps values (batch, features)"),
    "tuple": ("return (x,)", "returns a tuple of 1 value"),
    "list": ("return [x, x]", "returns a list of 2 values"),
    "dict": ("return {'out': x}", "returns a dict of 1 value"),
}


@pytest.mark.parametrize("batch", [8, 1])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_view_of_the_output_is_torchs_own_after_the_kernel(name, training, batch, tmp_path):
    body, call, level = VIEWS[name]
    ref = reference(tmp_path, name, body)
    graph = check_oracle(ref, training)
    assert graph.output_level() == level and graph.tail_code("x") == call
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = torch.rand(batch, SMALL["in_features"], dtype=torch.float64)
    with torch.no_grad():
        expect, got = model(x), graph.interpret(x, twin)
    assert got.shape == expect.shape
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["view_3d", "unsqueeze_last", "row_sums_squeeze"])
def test_the_emitted_forward_ends_in_the_view(name, tmp_path):
    body, call, _ = VIEWS[name]
    forward = emitted_forward_returning(tmp_path, reference(tmp_path, name, body), call)
    assert f"line 12 of the reference, `{body}`" in forward


@pytest.mark.parametrize("name", sorted(VIEWS_REFUSED))
def test_other_output_shapes_are_refused_in_words(name, tmp_path):
    body, message = VIEWS_REFUSED[name]
    with pytest.raises(Unsupported, match=re.escape(message)):
        trace(reference(tmp_path, name, body))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_the_oracles_gradients_go_through_the_view(name, training, tmp_path):
    from test_autodiff import check_module_gradients

    body, _, _ = VIEWS[name]
    check_module_gradients(reference(tmp_path, name, body), training)


@pytest.mark.parametrize("view", ["x.unsqueeze(1)", "x[:, None, :]", "x.view(x.size(0), -1, 6)", "x.view(-1)"])
def test_a_view_made_under_no_grad_has_no_gradient(view, tmp_path):
    """As in torch, where the view has no grad_fn and the parameters get no gradient through it
    (the (batch, 1, N) and (batch, P, k) views were taken as the output's tail with their
    gradient; review of session 56)."""
    body = f"with torch.no_grad():\n            z = {view}\n        return z"
    graph = check_oracle(reference(tmp_path, "no_grad_view", body), True)
    assert any(n.kind == "pointwise" and n.op == "detach" for n in graph.live())
    assert graph.gemm.id not in graph.gradient_reaches()
