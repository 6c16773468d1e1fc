"""Spellings session 19's probe of modules others write found refused (CPU): the same Linear
called twice on the input, a constant of a value's shape in arithmetic with numbers
(torch.ones_like(x) * 0.5), numpy numbers on either side of a value, a parameter's shape read
as numbers, and checks of the input's shape in forward (assert x.shape[1] == ..., a raise).
Each is traced to the IR of its plain spelling, checked against the module (fp64, train and
eval, and gradients against torch.autograd), and emitted as a file that constructs as the
reference does."""

import textwrap

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference

from test_spellings_ops import canonical, check
from kgen.frontend.trace import trace

HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.w = nn.Parameter(torch.randn(out_features, in_features) * 0.1)
        self.b = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""

# name: (spelled, plain): forward bodies on the module's input x.
SPELLINGS = {
    "the same Linear twice": ("return F.silu(self.fc(x)) + torch.tanh(self.fc(x))",
                              "y = self.fc(x)\nreturn F.silu(y) + torch.tanh(y)"),
    "the same Linear squared": ("return torch.relu(self.fc(x)) ** 2 + self.fc(x)",
                                "y = self.fc(x)\nreturn torch.relu(y) ** 2 + y"),
    "the same F.linear twice": ("return F.linear(x, self.w, self.b) * torch.sigmoid(F.linear(x, self.w, self.b))",
                                "y = F.linear(x, self.w, self.b)\nreturn y * torch.sigmoid(y)"),
    "ones_like times a number": ("y = self.fc(x)\nreturn y + torch.ones_like(y) * 0.5",
                                 "y = self.fc(x)\nreturn y + torch.full_like(y, 0.5)"),
    "a maximum with ones_like times a number": ("y = self.fc(x)\nreturn torch.maximum(y, 0.5 * torch.ones_like(y) - 1.0)",
                                                "y = self.fc(x)\nreturn torch.maximum(y, torch.full_like(y, -0.5))"),
    "a numpy number on the left": ("return np.sqrt(2.0) * self.fc(x)", "return 1.4142135623730951 * self.fc(x)"),
    "numpy float32 numbers": ("y = self.fc(x)\nreturn y * np.float32(0.5) + np.float32(1.0) * torch.tanh(y)",
                              "y = self.fc(x)\nreturn y * 0.5 + 1.0 * torch.tanh(y)"),
    "a tanh GELU with numpy's constants": (
        "y = self.fc(x)\nreturn 0.5 * y * (1 + torch.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * torch.pow(y, 3))))",
        "y = self.fc(x)\nreturn 0.5 * y * (1 + torch.tanh(0.7978845608028654 * (y + 0.044715 * torch.pow(y, 3))))"),
    "a weight's shape": ("return self.fc(x) / self.fc.weight.shape[1] + self.w.size(0) * self.b.dim()",
                         "return self.fc(x) / 16 + 24"),
    "a weight's shape unpacked": ("n, k = self.fc.weight.shape\nreturn self.fc(x) * k ** -0.5 + n * self.b.ndim",
                                  "return self.fc(x) * 0.25 + 24"),
    "assert on the input's features": ("assert x.dim() == 2, 'expected 2-D input'\nassert x.shape[1] == self.fc.in_features\n"
                                       "return torch.relu(self.fc(x))", "return torch.relu(self.fc(x))"),
    "a raise on the input's size": ("if x.size(-1) != self.fc.in_features:\n    raise ValueError('bad input')\n"
                                    "return torch.relu(self.fc(x))", "return torch.relu(self.fc(x))"),
    "the input's shape unpacked": ("b, k = x.shape\nassert k == 16\nreturn self.fc(x.view(b, k)).relu()",
                                   "return torch.relu(self.fc(x))"),
}


def write(tmp_path, name: str, body: str) -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8)))
    return Reference(path)


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_a_spelling_traces_as_its_plain_form_and_generates(name, tmp_path):
    spelled, plain = SPELLINGS[name]
    ref = write(tmp_path, "spelled", spelled)
    check(ref)
    assert canonical(trace(ref).describe()) == canonical(trace(write(tmp_path, "plain", plain)).describe())
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    ns: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), ns)
    torch.manual_seed(0)
    got = ns["ModelNew"](*ns["get_init_inputs"]()).state_dict()
    torch.manual_seed(0)
    expect = ref.Model(*ref.init_args()).state_dict()
    assert list(got) == list(expect) and all(torch.equal(got[k], expect[k]) for k in expect)


def test_two_linears_of_the_input_are_one_gemm_side_by_side(tmp_path):
    """Two different Linears of the module's input (a gated unit) are one GEMM of their weights
    concatenated (session 62: refused before); one with a bias beside one without is refused by
    name (tests/test_spellings_probe62_side.py has the rest)."""
    ref = write(tmp_path, "gated", "return self.fc(x) * torch.sigmoid(F.linear(x, self.w, self.b))")
    check(ref)
    assert trace(ref).gemm.attrs["side_by_side"] == ("fc.weight", "w")
    ref = write(tmp_path, "mixed", "return self.fc(x) * torch.sigmoid(F.linear(x, self.w))")
    with pytest.raises(Exception, match="some with a bias and some without"):
        trace(ref)


def test_a_torchscript_helper_is_refused_in_one_line(tmp_path):
    """A @torch.jit.script function called on a traced value: torch's message spans several
    lines; kgen's refusal is one (exit 2, no traceback)."""
    path = tmp_path / "jit.py"
    path.write_text(HEAD.format(body="        return _gelu(self.fc(x))").replace(
        "class Model", "@torch.jit.script\ndef _gelu(y):\n    return y * 0.5 * (1.0 + torch.erf(y * 0.7071067811865476))\n\n\nclass Model"))
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "torch.fx cannot trace Model.forward" in r.output, r.output
    assert "Traceback" not in r.output
