"""y[mask] = v after the GEMM (session 56's probe of idioms others write): fx's Proxy has no item
assignment, so every such module was refused with "an assignment into a value's elements". Now
fx records it (Tracer.unseen_by_fx_refused) and kgen takes it as torch.where(mask, v, y) written
into y and its aliases, where the mask is a comparison of (batch, features) values, y's shape, and
v a number or an element-wise expression of values selected by the same mask (y[m] = 0.1 * y[m],
y[m] *= 0.1). The IR is made of ops the kernels already have (a where, comparisons), so the CPU
checks decide: each spelling's IR against the module in fp64 (training and eval), its gradients
against torch.autograd, the same IR as its torch.where spelling, and `kgen generate` with
KernelBench's static checker; other masks and uses of y[mask] are refused in words."""

import re

import pytest
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_autodiff import check_module_gradients
from test_ir import SMALL
from test_spellings_ops import check, describe

SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.register_buffer("flags", torch.arange(out_features) % 3 == 0)
        self.s = nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        y = self.fc(x)
{body}


def get_inputs():
    return [torch.randn({batch}, {in_features})]


def get_init_inputs():
    return [{in_features}, {out_features}]
'''

# spelling -> (the forward after y = self.fc(x), the same module written with torch.where)
TAKEN = {
    "zero_below": ("y[y < 0] = 0\nreturn y", "return torch.where(y < 0, 0.0, y)"),
    "leaky_by_value": ("y[y < 0] = 0.1 * y[y < 0]\nreturn y", "return torch.where(y < 0, 0.1 * y, y)"),
    "augmented": ("y[y < 0] *= 0.1\nreturn y", "return torch.where(y < 0, y * 0.1, y)"),
    "two_bounds": ("y[y > 1] = 1.0\ny[y < -1] = -1.0\nreturn y",
                   "y = torch.where(y > 1, 1.0, y)\nreturn torch.where(y < -1, -1.0, y)"),
    "mask_named": ("m = y < 0\ny[m] = 0.0\nreturn y * 2", "return torch.where(y < 0, 0.0, y) * 2"),
    "mask_of_another": ("t = torch.tanh(y)\ny[t > 0.5] = t[t > 0.5] * 2\nreturn y",
                        "t = torch.tanh(y)\nreturn torch.where(t > 0.5, t * 2, y)"),
    "through_an_alias": ("z = y.view(y.size(0), -1)\nz[z < 0] = 0\nreturn y", "return torch.where(y < 0, 0.0, y)"),
    "clone_kept_apart": ("z = y.clone()\nz[z < 0] = 0\nreturn z + y", "return torch.where(y < 0, 0.0, y) + y"),
    "nan_to_zero": ("y[y != y] = 0.0\nreturn y", "return torch.where(y != y, 0.0, y)"),
    "a_function_of_it": ("y[y > 0] = torch.exp(-y[y > 0])\nreturn y", "return torch.where(y > 0, torch.exp(-y), y)"),
    # torch.isnan / isinf / isfinite: the comparisons they are (also in where, masked_fill)
    "isnan_mask": ("y[torch.isnan(y)] = 0.0\nreturn y", "return torch.where(y != y, 0.0, y)"),
    "isinf_method_mask": ("y[y.isinf()] = 1.0\nreturn y", "return torch.where(y.abs() == float('inf'), 1.0, y)"),
    "isfinite_where": ("return torch.where(torch.isfinite(y), y, 0.0)",
                       "return torch.where(y.abs() < float('inf'), y, 0.0)"),
    "by_a_0d_parameter": ("y[y < 0] = y[y < 0] * self.s\nreturn y", "return torch.where(y < 0, y * self.s, y)"),
    # (a value computed with gradients off has none, selected by a mask too)
    "computed_under_no_grad": ("with torch.no_grad():\n    v = y[y > 0] * 2\ny[y > 0] = v\nreturn y",
                               "return torch.where(y > 0, (y * 2).detach(), y)"),
}
REFUSED = {
    "another_mask_as_value": ("y[y > 0] = y[y < 1] * 2\nreturn y", "selected by another mask"),
    "a_reduction_of_it": ("return y[y > 0].sum()", "used other than in an element-wise expression"),
    "returned": ("return y[y > 0]", "the module returns y[mask]"),
    "a_slice": ("y[:, 0] = 0.0\nreturn y", "other than by a mask of its shape"),
    "a_row_mask": ("y[y.sum(1) > 0] = 0.0\nreturn y", "a mask whose shape is not its value's"),
    "a_bool_buffer": ("y[self.flags.expand_as(y)] = 0.0\nreturn y", "other than by a mask of its shape"),
    # torch's y[mask] is 1-d: with a (features,) or (batch, features) tensor torch fails, and so
    # must kgen, not broadcast the whole value (review of session 56)
    "with_a_bias": ("y[y > 0] = y[y > 0] + self.fc.bias\nreturn y", "in an op with a tensor of another shape"),
    "with_the_whole_value": ("y[y > 0] = y[y > 0] + torch.tanh(y)\nreturn y", "in an op with a tensor of another shape"),
    # a write through a view of the selection reaches the selection in torch (shared storage)
    "written_through_a_view": ("v = y[y > 0]\nw = v[:]\nw.mul_(3)\ny[y > 0] = v\nreturn y", "that another name shares"),
    "written_through_detach": ("v = y[y > 0]\nw = v.detach()\nw *= 3\ny[y > 0] = v\nreturn y",
                               "that another name shares"),
}


def write(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    body = "\n".join("        " + line for line in body.splitlines())
    path.write_text(SOURCE.format(body=body, batch=SMALL["batch"], in_features=SMALL["in_features"],
                                  out_features=SMALL["out_features"]))
    return Reference(str(path), SMALL)


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_masked_assignment_is_the_module_and_the_ir_of_its_torch_where_spelling(name, tmp_path):
    """The module in fp64 (training and eval), torch's gradients, lowering (test_spellings_ops.check),
    and the same IR as the torch.where spelling, operands included."""
    spelled, plain = TAKEN[name]
    check(write(tmp_path, "spelled", spelled))
    check_module_gradients(write(tmp_path, "spelled", spelled), False)
    assert describe(write(tmp_path, "spelled", spelled)) == describe(write(tmp_path, "plain", plain))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_other_masks_and_uses_are_refused_in_words(name, tmp_path):
    body, message = REFUSED[name]
    with pytest.raises(Unsupported, match=re.escape(message)):
        trace(write(tmp_path, name, body))


def test_the_emitted_file_passes_kernelbenchs_static_checker(tmp_path):
    from test_kernelbench_corpus import FILES, kernelbench_checker

    ref = write(tmp_path, "leaky_by_value", TAKEN["leaky_by_value"][0])
    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    if not FILES:
        pytest.skip("KernelBench's checker is not here")
    valid, errors, _ = kernelbench_checker()(out.read_text(), backend="cuda", precision="fp32")
    assert valid, errors


@pytest.mark.parametrize("body", ["y[torch.isnan(y)] = 0.0\nreturn y", "return y.masked_fill(torch.isinf(y), 1.0)",
                                  "return torch.where(y.isfinite(), y, -1.0)", "return y + torch.isnan(y).float()"])
def test_isnan_isinf_isfinite_on_values_that_hold_them(body, tmp_path):
    """On a value holding NaN and both infinities, the IR is the module (NaN where it has NaN)."""
    import copy

    import torch

    nonfinite = "y = y / (y > 0.3)\ny = y - torch.where(y > 2.5, float('inf'), 0.0)\n"   # 0/0, x/0, inf
    ref = write(tmp_path, "nonfinite", nonfinite + body)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    twin = copy.deepcopy(model)
    x = torch.rand(SMALL["batch"], SMALL["in_features"], dtype=torch.float64) * 4 - 2
    with torch.no_grad():
        expect, got = model(x), graph.interpret(x, twin)
    assert torch.equal(torch.isnan(got), torch.isnan(expect))
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12, equal_nan=True)
