"""What session 54's probe of op chains others write after a GEMM found (CPU), as spellings:

- flatten of a (batch, 1) value (a reduction with keepdim=True) with start_dim given by keyword
  (torch.flatten(x, start_dim=1), x.flatten(start_dim=1)) was read as flatten(): a (batch,)
  output where torch keeps (batch, 1) (a wrong result). flatten(1) and nn.Flatten() of one were
  refused, flatten(0) too, and flatten() of a (batch,) value: now flatten from dim 0 is the
  (batch,) value, from dim 1 the value itself, as in torch.
- torch.max / torch.min with input= raised an IndexError; with axis= (numpy's name, which the other
  reductions take) they were refused as a max over every element.
- torch's own names of functions kgen takes as F.* (torch.selu, torch.selu_, torch.celu,
  torch.threshold, torch.layer_norm, torch.group_norm) and the method x.prelu(w) were refused.
- F.hardtanh(x, 1.0, -1.0) (min_val above max_val, which torch refuses when the module runs) was
  taken by the tracer and crashed the lowering with torch's ValueError; now refused.
- the IR's gradient oracle (kgen.ir.autodiff.graph_vjp) drew a Dropout's mask of a chain's first
  part again for its backward: another mask than the forward's.
Accepted spellings are checked against the module (fp64, training and eval, gradients against
torch.autograd) and trace to the IR of their plain form.
"""

import copy
import textwrap

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

from test_spellings_ops import canonical, check

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
{init}
    def forward(self, x):
{body}


batch_size = 8
in_features = 16
out_features = 24


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
"""


def write(tmp_path, name: str, body: str, init: str = "") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), init=textwrap.indent(init, " " * 8)))
    return Reference(path)


def describe(ref: Reference) -> str:
    return canonical(trace(ref).describe())


# ---- flatten of a per-row value ----------------------------------------------------------------
ROW = "r = self.fc(x).sum(1, keepdim=True)\n"
# (spelling, its plain form)
FLATTENS = {
    "torch.flatten start_dim=1": ("return torch.relu(torch.flatten(r, start_dim=1))", "return torch.relu(r)"),
    "method start_dim=1": ("return r.flatten(start_dim=1) * 2", "return r * 2"),
    "flatten(1)": ("return r.flatten(1)", "return r"),
    "flatten(-1)": ("return torch.flatten(r, -1)", "return r"),
    "flatten(1, -1)": ("return r.flatten(1, -1)", "return r"),
    "nn.Flatten": ("return self.flat(r) - 1.0", "return r - 1.0"),
    "flatten()": ("return r.flatten()", "return r.squeeze(1)"),
    "flatten(0)": ("return r.flatten(0)", "return r.squeeze(1)"),
    "start_dim=0": ("return torch.flatten(r, start_dim=0)", "return r.squeeze(1)"),
    "end_dim=-1 alone": ("return r.flatten(end_dim=-1)", "return r.squeeze(1)"),
    "flatten() of (batch,)": ("return r.squeeze(1).flatten()", "return r.squeeze(1)"),
    "flatten(0) of (batch,)": ("return r.squeeze(1).flatten(0) + 1.0", "return r.squeeze(1) + 1.0"),
}


@pytest.mark.parametrize("case", sorted(FLATTENS))
def test_flatten_of_a_per_row_value_keeps_torchs_shape(case, tmp_path):
    spelled, plain = FLATTENS[case]
    init = "self.flat = nn.Flatten()\n"
    ref = write(tmp_path, "flat", ROW + spelled, init)
    check(ref)   # (the oracle compares shapes: (batch,) for torch's (batch, 1) failed here)
    assert describe(ref) == describe(write(tmp_path, "plain", ROW + plain, init))


def test_a_flatten_that_would_change_the_rows_is_refused(tmp_path):
    with pytest.raises(Unsupported, match=r"\.flatten\(0, 0\) of a \(batch, 1\) value"):
        trace(write(tmp_path, "flat", ROW + "return r.flatten(0, 0)"))


# ---- torch.max / torch.min spelled with keywords ----------------------------------------------
MAX_MIN = {
    "input=": ("v, i = torch.max(input=y, dim=1, keepdim=True)\nreturn v", "return y.amax(1, keepdim=True)"),
    "axis=": ("return torch.max(y, axis=1, keepdim=True)[0]", "return y.amax(1, keepdim=True)"),
    "method axis=": ("return y.min(axis=-1).values", "return y.amin(1)"),
    "keepdims=": ("return torch.min(y, 1, keepdims=True)[0]", "return y.amin(1, keepdim=True)"),
    "input= other=": ("return torch.max(input=y, other=torch.zeros_like(y))", "return torch.maximum(y, torch.zeros_like(y))"),
}


@pytest.mark.parametrize("case", sorted(MAX_MIN))
def test_max_and_min_read_keywords_as_the_other_reductions(case, tmp_path):
    spelled, plain = MAX_MIN[case]
    ref = write(tmp_path, "mm", "y = self.fc(x)\n" + spelled)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", "y = self.fc(x)\n" + plain))


# ---- torch's names of the functions kgen takes -------------------------------------------------
ALIASES = {
    "torch.selu": ("y = torch.selu(y)", "y = F.selu(y)"),
    "torch.selu_": ("torch.selu_(y)", "y = F.selu(y)"),
    "torch.selu_ with an alias": ("z = y\ntorch.selu_(y)\ny = y + z", "y = F.selu(y)\ny = y + y"),
    "torch.celu": ("y = torch.celu(y, 2.0)", "y = F.celu(y, 2.0)"),
    "torch.celu alpha=": ("y = torch.celu(y, alpha=0.5)", "y = F.celu(y, alpha=0.5)"),
    "torch.threshold": ("y = torch.threshold(y, 0.1, 2.0)", "y = F.threshold(y, 0.1, 2.0)"),
    "x.prelu one weight": ("y = y.prelu(self.a1)", "y = F.prelu(y, self.a1)"),
    "x.prelu per feature": ("y = y.prelu(self.an)", "y = F.prelu(y, self.an)"),
    "torch.layer_norm": ("y = torch.layer_norm(y, (24,))", "y = F.layer_norm(y, (24,))"),
    "torch.layer_norm, all arguments": ("y = torch.layer_norm(y, [y.size(-1)], self.ln.weight, self.ln.bias, 1e-5, True)",
                                        "y = self.ln(y)"),
    "torch.group_norm": ("y = torch.group_norm(y, 4)", "y = F.group_norm(y, 4)"),
    "torch.group_norm, all arguments": ("y = torch.group_norm(y, 4, self.gn.weight, self.gn.bias, 1e-5, True)",
                                        "y = self.gn(y)"),
}
ALIAS_INIT = ("self.a1 = nn.Parameter(torch.full((1,), 0.2))\nself.an = nn.Parameter(torch.linspace(-0.5, 0.5, 24))\n"
              "self.ln = nn.LayerNorm(24)\nself.gn = nn.GroupNorm(4, 24)\n")


@pytest.mark.parametrize("case", sorted(ALIASES))
def test_torchs_names_are_the_functional_ops(case, tmp_path):
    spelled, plain = ALIASES[case]
    ref = write(tmp_path, "alias", f"y = self.fc(x)\n{spelled}\nreturn y", ALIAS_INIT)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", f"y = self.fc(x)\n{plain}\nreturn y", ALIAS_INIT))


# ---- settings torch refuses --------------------------------------------------------------------
def test_hardtanh_with_its_bounds_swapped_is_refused_not_a_crash(tmp_path):
    with pytest.raises(Unsupported, match=r"hardtanh with min_val=1.0, max_val=-1.0, which torch refuses too"):
        trace(write(tmp_path, "ht", "return F.hardtanh(self.fc(x), 1.0, -1.0)"))


def test_hardtanh_with_equal_bounds_is_taken(tmp_path):
    check(write(tmp_path, "ht", "return F.hardtanh(self.fc(x), 0.5, 0.5)"))


# ---- the gradient oracle's dropout masks in a chain --------------------------------------------
@pytest.mark.parametrize("where", ["first", "both", "last"])
def test_the_gradient_oracle_reads_the_forwards_masks_in_a_chain(where, tmp_path):
    body = {"first": "h = self.do(self.fc(x))\nreturn self.fc2(h)",
            "both": "h = self.do(self.fc(x))\nreturn self.do(torch.tanh(self.fc2(h)))",
            "last": "h = torch.relu(self.fc(x))\nreturn self.do(self.fc2(h))"}[where]
    ref = write(tmp_path, "chain", body, "self.do = nn.Dropout(0.3)\nself.fc2 = nn.Linear(24, 12)\n")
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train()
    twin = copy.deepcopy(model)
    x = (torch.rand(8, 16, dtype=torch.float64) * 2 - 1).requires_grad_()
    torch.manual_seed(9)
    y = model(x)
    after = torch.get_rng_state()
    g = torch.randn_like(y)
    expect = torch.autograd.grad(y, [x, *model.parameters()], g)
    with torch.no_grad():
        torch.manual_seed(9)
        grad_x, grads = graph_vjp(graph, x.detach(), twin, g)
    torch.testing.assert_close(grad_x, expect[0], rtol=1e-9, atol=1e-10)
    for (name, _), e in zip(model.named_parameters(), expect[1:]):
        torch.testing.assert_close(grads[name], e, rtol=1e-9, atol=1e-10, msg=name)
    assert torch.equal(torch.get_rng_state(), after)   # (left where the module's forward leaves it)


# ---- fx's own failure, in the user's words -----------------------------------------------------
@pytest.mark.parametrize("body", ["return torch.min(self.fc(x), torch.tensor(self.c))",
                                  "return self.fc(x) * torch.as_tensor(self.c)",
                                  "y = self.fc(x)\nreturn torch.tensor(y) * 2"])
def test_a_tensor_made_of_a_tensor_says_so(body, tmp_path):
    """torch.tensor(self.constant) of a Parameter (KernelBench 68's constant, written so) failed in
    fx with "`__cuda_array_interface__` must be a dict"."""
    ref = write(tmp_path, "copy", body, "self.c = nn.Parameter(torch.tensor(2.0))\n")
    with pytest.raises(Unsupported) as e:
        trace(ref)
    assert "torch.tensor() / torch.as_tensor() of a tensor" in str(e.value)
    assert "__cuda_array_interface__" not in str(e.value)
