"""What session 28's probe of modules others write found (CPU), generated as spellings:

- an in-place op through an alias kgen did not know: a full slice (`y[:, :]`, `y[...]`),
  `view_as` / `reshape_as`, `torch.flatten` / `torch.reshape` / `torch.squeeze`, and the base of an
  `expand_as` written after the expansion was taken. The write reached one name and not the others
  (a wrong result). Now every view joins the alias group.
- `.float()` / `.to(dtype)` / `.type_as()`: the tensor itself in a float32 module, a copy in a bf16
  one. An in-place op whose effect on the other side is read later is refused (one IR cannot be
  right in both dtypes); one whose other side is never read again is taken.
- `Model.__call__` overridden: refused (kgen traces forward alone). nn.Identity and Dropout(p=0) on
  the input: the identity, accepted (torchvision heads).
- a module whose output has no gradient (detached, forward under torch.no_grad()): the emitted
  forward's output has none either, and no gradient goes where the output's does not reach (None,
  not zeros); kgen's backward oracle gives zeros instead of an AssertionError.
- messages: indexing by a tensor, float() of a traced value, a buffer rebound in forward, an
  in-place op on a buffer, squeeze(1) of a (batch, N) value (torch's no-op: now accepted).
Accepted spellings are checked against the module (fp64, training and eval, gradients against
torch.autograd) and trace to the IR of their plain form.
"""

import textwrap

import pytest
import torch

from kgen.codegen import generator
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir import autodiff
from kgen.ir.graph import Unsupported
from kgen.tune.spec import Spec, Tile

from test_spellings_ops import canonical, check, without_casts

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.fc2 = nn.Linear(in_features, in_features)
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.register_buffer("steps", torch.zeros(()))
        self.register_buffer("idx", torch.tensor([0, 2]))
        self.relu = nn.ReLU(inplace=True)
        self.keep = nn.Identity()
        self.drop0 = nn.Dropout(0.0)

    def forward(self, x):
{body}
{extra}

def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""


def write(tmp_path, name: str, body: str, extra: str = "") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), extra=extra))
    return Reference(path)


# ---- in-place ops through every view -----------------------------------------------------------
# (how z is taken from y, the in-place op on z; y is returned: it must see the write)
VIEWS = {
    "full slice": "z = y[:, :]",
    "ellipsis": "z = y[...]",
    "view_as": "z = y.view_as(y)",
    "reshape_as": "z = y.reshape_as(y)",
    "torch.flatten": "z = torch.flatten(y, 1)",
    "torch.reshape": "z = torch.reshape(y, (-1, 24))",
    "torch.squeeze": "z = torch.squeeze(y, 1)",
    "squeeze(1)": "z = y.squeeze(1)",
}
WRITES = {"add_": ("z.add_(0.5)", "y = y + 0.5"), "relu module": ("self.relu(z)", "y = torch.relu(y)"),
          "augmented": ("z *= 2.0", "y = y * 2.0")}
CASES = [(v, "add_") for v in VIEWS] + [("full slice", w) for w in WRITES if w != "add_"] + [("view_as", "relu module")]


@pytest.mark.parametrize("view, write_", CASES)
def test_an_in_place_op_through_a_view_reaches_its_base(view, write_, tmp_path):
    op, plain_op = WRITES[write_]
    ref = write(tmp_path, "spelled", f"y = self.fc(x)\n{VIEWS[view]}\n{op}\nreturn torch.tanh(y)")
    check(ref)
    plain = write(tmp_path, "plain", f"y = self.fc(x)\n{plain_op}\nreturn torch.tanh(y)")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


@pytest.mark.parametrize("expand", ["e = m.expand_as(y)", "e = m.expand(-1, 24)", "e = m.expand(x.size(0), 24)",
                                    "e = torch.broadcast_to(m, y.shape)", "e = m.broadcast_to(y.shape)"])
def test_writing_the_base_of_an_expansion_reaches_the_expansion(expand, tmp_path):
    """m (a row value) expanded, then m written in place: the expansion reads the new m."""
    body = f"y = self.fc(x)\nm = y.mean(1, keepdim=True)\n{expand}\nm.mul_(2.0)\nreturn y - e"
    check(write(tmp_path, "spelled", body))


# Conversions to a dtype the source names: the tensor itself in that dtype only.
CONVERSIONS = ["y.float()", "y.to(torch.float32)", "y.to(dtype=torch.float32)", "y.type(torch.float32)"]
# The module's own dtype or device: the tensor itself in every dtype (x and the Linear share one).
SAME_TENSOR = ["y.to(x.dtype)", "y.type_as(x)", "y.to(x.device)"]


@pytest.mark.parametrize("conversion", SAME_TENSOR)
def test_a_write_through_a_conversion_to_the_modules_own_dtype_reaches_both(conversion, tmp_path):
    ref = write(tmp_path, "spelled", f"y = self.fc(x)\nz = {conversion}\nz.mul_(2.0)\nreturn torch.tanh(y) + z")
    check(ref)
    plain = write(tmp_path, "plain", "y = self.fc(x)\ny = y * 2.0\nreturn torch.tanh(y) + y")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_a_write_through_a_conversion_read_on_the_other_side_is_refused(conversion, tmp_path):
    ref = write(tmp_path, "spelled", f"y = self.fc(x)\nz = {conversion}\nz.mul_(2.0)\nreturn z + y")
    with pytest.raises(Unsupported, match=r"shares its tensor with another through \.float\(\)"):
        trace(ref)
    # the base written, the conversion read afterwards: the same
    ref = write(tmp_path, "base", f"y = self.fc(x)\nz = {conversion}\ny.add_(1.0)\nreturn z * y")
    with pytest.raises(Unsupported, match=r"shares its tensor with another through \.float\(\)"):
        trace(ref)


@pytest.mark.parametrize("conversion", CONVERSIONS + SAME_TENSOR)
def test_a_write_through_a_conversion_nothing_else_reads_is_taken(conversion, tmp_path):
    """`y = self.fc(x).float(); y += 1`: the same in every dtype (the other side is never read)."""
    ref = write(tmp_path, "spelled", f"y = {conversion.replace('y.', 'self.fc(x).')}\ny += 1.0\nreturn torch.tanh(y)")
    graph = trace(ref)
    plain = write(tmp_path, "plain", "y = self.fc(x)\ny = y + 1.0\nreturn torch.tanh(y)")
    # (a cast to float32 is a to_float32 node, the identity in an fp32 build: test_spellings_ops)
    assert canonical(without_casts(graph)) == canonical(trace(plain).describe())


@pytest.mark.parametrize("body", [
    "v = torch.max(y, 1, keepdim=True)[0]\nv.mul_(2.0)\nreturn y - v",
    "v, i = torch.max(y, 1, keepdim=True)\nv += 1.0\nreturn y - v",
    "v, m = torch.var_mean(y, 1, keepdim=True)\nm *= 2.0\nreturn (y - m) * v",
])
def test_an_element_of_a_returned_tuple_is_written_as_its_own_tensor(body, tmp_path):
    """torch.max(y, 1)[0] is a new tensor, not a view of a tuple: a write to it is an ordinary one."""
    check(write(tmp_path, "tuple", "y = self.fc(x)\n" + body))


@pytest.mark.parametrize("sizes", ["s = y.size()[:-1] + (24,)", "s = y.size()[:-1]\ns += (24,)",
                                   "s = y.shape[:1] + (24,)"])
def test_sizes_joined_for_a_view(sizes, tmp_path):
    """HF GPT-2's Conv1D joins a value's sizes for the view back (`x.size()[:-1] + (self.nf,)`)."""
    ref = write(tmp_path, "sizes", f"y = self.fc(x)\n{sizes}\nreturn torch.relu(y.view(s))")
    check(ref)
    plain = write(tmp_path, "plain", "return torch.relu(self.fc(x))")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


# ---- what forward is called through ------------------------------------------------------------
def test_a_model_that_overrides_call_is_refused(tmp_path):
    extra = "\n    def __call__(self, x):\n        return super().__call__(x) * 2.0\n"
    with pytest.raises(Unsupported, match="overrides __call__"):
        trace(write(tmp_path, "call", "return self.fc(x)", extra))


@pytest.mark.parametrize("on_input", ["self.keep(x)", "self.drop0(x)", "self.keep(self.drop0(x))"])
def test_identity_modules_on_the_input_are_the_input(on_input, tmp_path):
    ref = write(tmp_path, "identity", f"x = {on_input}\nreturn torch.relu(self.fc(x))")
    check(ref)
    plain = write(tmp_path, "plain", "return torch.relu(self.fc(x))")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


# ---- outputs without a gradient -------------------------------------------------------------------
WGMMA = Tile(128, 128, 32, 16, 128, stages=4)


def _file_text(ref: Reference) -> str:
    out = trace(ref).out_features
    return generator.render(Spec.of(str(ref.path), 8, 16, out, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA))


@pytest.mark.parametrize("body", ["y = self.fc(x).detach()\nreturn y * torch.sigmoid(y)",
                                  "with torch.no_grad():\n    y = self.fc(x)\nreturn torch.tanh(y)",
                                  # (in = out = 16 here: the input read before a row op, detached)
                                  "return torch.softmax(self.fc2(x).detach() + x.detach(), 1)"])
def test_an_output_without_gradient_has_none_in_the_emitted_file(body, tmp_path):
    ref = write(tmp_path, "nograd", body)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.randn(8, 16, dtype=torch.float64)
    with torch.enable_grad():
        assert not model(x.requires_grad_()).requires_grad   # (the reference: no gradient at all)
    y = model(x.detach())
    dx, grads = autodiff.graph_vjp(graph, x.detach(), model, torch.ones_like(y))
    assert torch.equal(dx, torch.zeros_like(dx)) and grads == {}
    text = _file_text(ref)
    assert ("return x.detach()" in text or "return _kgen_autocast_output(x.detach(), " in text) \
        and "no gradient: the reference's output has none" in text
    assert "grads = (None, None, " in text


def test_a_detached_gemm_output_sends_gradients_to_the_later_parameters_only(tmp_path):
    """`self.fc(x).detach() * self.scale`: scale gets its gradient, x and fc none (None, as torch)."""
    ref = write(tmp_path, "partial", "return self.fc(x).detach() * self.scale")
    check(ref, grads=False)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.randn(8, 16, dtype=torch.float64, requires_grad=True)
    g = torch.randn(8, 24, dtype=torch.float64)
    with torch.enable_grad():
        expect = torch.autograd.grad(model(x), [x, model.fc.weight, model.scale], g, allow_unused=True)
    assert expect[0] is None and expect[1] is None
    dx, grads = autodiff.graph_vjp(trace(ref), x.detach(), model, g)
    assert set(grads) == {"scale"} and torch.equal(dx, torch.zeros_like(dx))
    torch.testing.assert_close(grads["scale"], expect[2], rtol=1e-12, atol=1e-12)
    text = _file_text(ref)
    assert "grads = (None, None, " in text and "return x.detach()" not in text


# ---- messages --------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, message", [
    ("y = self.fc(x)\nreturn y[y > 0]", r"returns y\[mask\], the elements a mask selects"),
    ("y = self.fc(x)\nreturn y[:, self.idx]", "indexing a value by a tensor"),
    ("y = self.fc(x)\nreturn y - float(y.mean())", "a traced value turned into a Python number"),
    ("self.steps += 1\nreturn self.fc(x)", "self.steps is assigned in forward"),
    ("self.steps.add_(1)\nreturn self.fc(x)", "in-place add_ on the buffer steps"),
    ("y = self.fc(x)\nreturn y.squeeze()", r"squeeze\(\) of a \(batch, features\) value, which drops a batch of 1"),
    # a slice by a traced size is a full slice, refused for what it is, not as indexing by a tensor
    ("y = self.fc(x)\nreturn y[:x.size(0)]", "indexing a value: |slice|size"),
    # a pooled value of one column: squeeze(1) drops that column (here the second squeeze)
    ("y = self.fc(x)\nreturn F.max_pool1d(y.unsqueeze(1), 24).squeeze(1).squeeze(1)", "squeeze"),
])
def test_refusals_say_what_the_module_does(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        trace(write(tmp_path, "refused", body))
