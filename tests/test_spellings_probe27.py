"""What session 27's probe of modules others write found wrong (CPU), generated as spellings:

- `name op= value` written in place wherever the statement is: fx records it as `x + y`, and kgen
  had told the two apart from one source line, so an augmented assignment across lines, after a
  `;`, in a one-line `if` or loop, in a helper function, or with `**=`, `//=`, `%=` was taken out
  of place and a name bound to the same tensor read the old value (a wrong result).
- forward's own gradient switches: values computed under torch.no_grad(), set_grad_enabled(False)
  or inference_mode get no gradient (as .detach()); a parameter's value computed so is refused.
- what fx records nothing of and kgen would take wrongly, refused by line: torch.autocast in
  forward, a custom torch.autograd.Function.
- a module called by keyword (self.fc(input=x)), torch.dropout(x, p, train), torch.special's
  softmax / log_softmax / logsumexp, an op on parameters alone before the first GEMM (CLIP's
  `self.logit_scale.exp() * F.normalize(self.fc(x))`: taken where it is first used).
Each accepted spelling traces to the IR of its plain form and is checked against the module
(fp64, training and eval, gradients against torch.autograd)."""

import textwrap

import pytest
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_spellings_ops import canonical, check

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

{helpers}

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.alpha = nn.Parameter(torch.tensor(0.7))
        self.flag = True
        self.act = nn.GELU()

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""


def write(tmp_path, name: str, body: str, helpers: str = "") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), helpers=helpers))
    return Reference(path)


# ---- augmented assignments: every operator in every layout -----------------------------------
# (operator, its value, whether torch's autograd differentiates it: floor_divide and remainder
# have a zero / identity derivative kgen's oracle takes as torch does, checked below)
OPERATORS = {"+=": "0.25", "-=": "0.5", "*=": "1.5", "/=": "2.0", "**=": "2", "//=": "0.5", "%=": "0.5"}
# How the statement `z OP= VALUE` is laid out: each alias z of y written in place, y returned.
LAYOUTS = {
    "its own line": ("z {op} {value}", ""),
    "after a semicolon": ("w = y * 1.0; z {op} {value}", ""),
    "in a one-line if": ("if self.flag: z {op} {value}", ""),
    "across lines": ("z {op} (\n    {value}\n)", ""),
    "after a backslash": ("z {op} \\\n    {value}", ""),
    "in a loop of one": ("for _ in range(1): z {op} {value}", ""),
    "in a helper function": ("bump(z)", "def bump(t):\n    t {op} {value}\n"),
}


def augmented(op: str, layout: str) -> tuple[str, str, str]:
    statement, helper = LAYOUTS[layout]
    value = OPERATORS[op]
    body = "y = self.fc(x)\nz = y\n" + statement.format(op=op, value=value) + "\nreturn torch.tanh(y)"
    plain = f"y = self.fc(x)\ny = y {op[:-1]} {value}\nreturn torch.tanh(y)"
    return body, helper.format(op=op, value=value), plain


CASES = [(op, "its own line") for op in OPERATORS] + [("*=", layout) for layout in LAYOUTS if layout != "its own line"] \
    + [("**=", "across lines"), ("-=", "in a helper function"), ("%=", "after a semicolon")]


@pytest.mark.parametrize("op, layout", CASES)
def test_an_augmented_assignment_writes_in_place_wherever_it_is(op, layout, tmp_path):
    body, helper, plain = augmented(op, layout)
    ref = write(tmp_path, "spelled", body, helper)
    check(ref, grads=op not in ("//=", "%="))
    assert canonical(trace(ref).describe()) == canonical(trace(write(tmp_path, "plain", plain)).describe())


def test_an_augmented_assignment_of_a_new_name_is_not_an_alias(tmp_path):
    """`z = y * 1.0` is a new tensor: z += c there leaves y as it is (what the IR must keep)."""
    ref = write(tmp_path, "copy", "y = self.fc(x)\nz = y * 1.0\nz += (\n    0.5\n)\nreturn torch.tanh(y) + z")
    check(ref)


# ---- gradients switched off in forward ----------------------------------------------------------
NO_GRAD = {
    "torch.no_grad()": "with torch.no_grad():\n    m = y.amax(1, keepdim=True)",
    "set_grad_enabled(False)": "with torch.set_grad_enabled(False):\n    m = y.amax(1, keepdim=True)",
    "inference_mode()": "with torch.inference_mode():\n    m = y.amax(1, keepdim=True)",
}


@pytest.mark.parametrize("name", sorted(NO_GRAD))
def test_a_value_computed_without_gradients_is_detached(name, tmp_path):
    body = "y = self.fc(x)\n" + NO_GRAD[name] + "\nreturn torch.exp(y - m) * 0.5"
    ref = write(tmp_path, "spelled", body)
    if name == "inference_mode()":
        # (torch refuses an inference tensor in autograd: the module itself cannot train)
        check(ref, grads=False)
    else:
        check(ref)
    plain = "y = self.fc(x)\nm = y.amax(1, keepdim=True).detach()\nreturn torch.exp(y - m) * 0.5"
    assert canonical(trace(ref).describe()) == canonical(trace(write(tmp_path, "plain", plain)).describe())


def test_a_no_grad_helper_detaches_what_it_computes(tmp_path):
    helper = "@torch.no_grad()\ndef row_max(t):\n    return t.amax(1, keepdim=True)\n"
    ref = write(tmp_path, "helper", "y = self.fc(x)\nreturn torch.exp(y - row_max(y))", helper)
    check(ref)


def test_a_parameter_read_under_no_grad_is_still_the_parameter(tmp_path):
    """self.alpha read inside a no_grad block (not computed on) still has its gradient."""
    ref = write(tmp_path, "read", "with torch.no_grad():\n    a = self.alpha\nreturn self.fc(x) * a")
    check(ref)


def test_a_parameter_computed_under_no_grad_gets_no_gradient_through_it(tmp_path):
    """self.alpha.clamp(0, 1) under no_grad after the GEMM: a value of the epilogue, detached
    (alpha's gradient through it is zero, as torch's)."""
    ref = write(tmp_path, "param", "y = self.fc(x)\nwith torch.no_grad():\n    a = self.alpha.clamp(0.0, 1.0)\n"
                "return y * a + y * self.alpha")
    check(ref)


def test_a_parameter_viewed_under_no_grad_is_refused(tmp_path):
    """A view of a parameter made under no_grad has no gradient in torch; kgen reads a view as
    the parameter itself, so it refuses rather than give the parameter a gradient."""
    ref = write(tmp_path, "param", "y = self.fc(x)\nwith torch.no_grad():\n    a = self.alpha.view(1)\nreturn y * a")
    with pytest.raises(Unsupported, match=r"line \d+: .*under torch.no_grad\(\)"):
        trace(ref)


# ---- what fx records nothing of ------------------------------------------------------------------
UNSEEN = {
    "an autocast block": ("with torch.autocast('cpu', dtype=torch.bfloat16):\n    y = self.fc(x)\nreturn torch.relu(y)",
                          "", "torch.autocast in forward"),
    "CUDA's autocast, which a CPU disables": (
        "with torch.autocast(device_type='cuda', dtype=torch.float16):\n    y = self.fc(x)\nreturn y.float()",
        "", "torch.autocast in forward"),
    "a custom autograd Function": (
        "return RoundSTE.apply(self.fc(x) * 4.0) / 4.0",
        "class RoundSTE(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n        return t.round()\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g\n", "the custom torch.autograd.Function RoundSTE"),
}


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_what_fx_does_not_record_is_refused_by_line(name, tmp_path):
    body, helper, said = UNSEEN[name]
    ref = write(tmp_path, "unseen", body, helper)
    with pytest.raises(Unsupported, match=rf"line \d+: `.+`: {said}"):
        trace(ref)
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "Traceback" not in r.output, r.output
    # the patched torch classes are themselves again after the trace
    import torch
    assert torch.autograd.Function.__dict__["apply"].__func__.__qualname__ == "Function.apply"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cpu")


# ---- spellings of what kgen takes ------------------------------------------------------------------
SPELLINGS = {
    "modules called by keyword": ("return F.gelu(self.fc(input=x))", "return F.gelu(self.fc(x))"),
    "an activation module by keyword": ("return self.act(input=self.fc(x))", "return F.gelu(self.fc(x))"),
    "torch.dropout at p=0": ("return torch.dropout(torch.relu(self.fc(x)), 0.0, True)", "return torch.relu(self.fc(x))"),
    "torch.dropout in eval": ("return torch.dropout(torch.relu(self.fc(x)), 0.3, False)", "return torch.relu(self.fc(x))"),
    "a parameter's exp before the GEMM": ("s = self.alpha.exp()\ny = self.fc(x)\nreturn y * s",
                                          "y = self.fc(x)\nreturn y * self.alpha.exp()"),
    "CLIP's logit scale on the left": ("return self.alpha.exp() * F.normalize(self.fc(x), dim=-1)",
                                       "y = F.normalize(self.fc(x), dim=-1)\nreturn self.alpha.exp() * y"),
    "a chain of ops on a parameter before the GEMM": (
        "a = self.alpha.clamp(0.0, 1.0).mul(2.0)\nreturn torch.tanh(self.fc(x)) * a",
        "y = torch.tanh(self.fc(x))\nreturn y * self.alpha.clamp(0.0, 1.0).mul(2.0)"),
    "a parameter's op under no_grad before the GEMM": (
        "with torch.no_grad():\n    a = self.alpha.clamp(0.0, 1.0)\nreturn self.fc(x) * a + self.alpha",
        "y = self.fc(x)\nreturn y * self.alpha.clamp(0.0, 1.0).detach() + self.alpha"),
    "torch.special's softmax": ("return torch.special.softmax(self.fc(x), 1)", "return torch.softmax(self.fc(x), 1)"),
    "torch.special's log_softmax": ("return torch.special.log_softmax(self.fc(x), dim=-1)",
                                    "return torch.log_softmax(self.fc(x), 1)"),
    "torch.special's logsumexp": ("return torch.special.logsumexp(self.fc(x), 1, keepdim=True)",
                                  "return torch.logsumexp(self.fc(x), 1, keepdim=True)"),
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_a_spelling_traces_as_its_plain_form(name, tmp_path):
    spelled, plain = SPELLINGS[name]
    ref = write(tmp_path, "spelled", spelled)
    check(ref)
    assert canonical(trace(ref).describe()) == canonical(trace(write(tmp_path, "plain", plain)).describe())


# ---- refusals name a function as users call it -----------------------------------------------------
REFUSED_FUNCTIONS = {
    "torch.lgamma": "return torch.lgamma(self.fc(x).abs() + 1.0)",
    "torch.special.erfinv": "return torch.special.erfinv(torch.tanh(self.fc(x)) * 0.9)",
    # (a boolean_dispatch function; adaptive_max_pool1d, named here before, is taken since session 58)
    "torch.nn.functional.adaptive_max_pool2d": "return F.adaptive_max_pool2d(self.fc(x).unsqueeze(1), (1, 8)).flatten(1)",
}


@pytest.mark.parametrize("name", sorted(REFUSED_FUNCTIONS))
def test_a_refused_function_is_named_as_users_call_it(name, tmp_path):
    """Not by torch's internal qualified name (torch._VariableFunctionsClass.lgamma,
    torch._C._special.special_erfinv, boolean_dispatch.<locals>.fn)."""
    ref = write(tmp_path, "refused", REFUSED_FUNCTIONS[name])
    with pytest.raises(Unsupported, match=rf"line \d+: `.+`: the function {name} is not supported"):
        trace(ref)


# ---- what fx cannot trace: kgen's words and the line ------------------------------------------------
FX_REFUSALS = {
    "a branch on a value": ("y = self.fc(x)\nif y.sum() > 0:\n    y = y * 2.0\nreturn y", "if y.sum() > 0:",
                            "a branch on a traced value"),
    "a shape unpacked": ("y = self.fc(x)\nreturn torch.tanh(y.reshape(*y.shape))", "y.reshape(*y.shape)",
                         "a traced value unpacked or iterated"),
    "an assignment into elements": ("y = self.fc(x)\ny[:, 0] = 0.0\nreturn y", "y[:, 0] = 0.0",
                                    "an assignment into a value's elements"),
    # (a slice of the model's Sequential, self.seq[1:](y), is taken since session 59: its layers are
    # the model's; test_spellings_probe59_respelled)
    "a Linear made in forward": ("return nn.Linear(24, 24)(self.fc(x))", "nn.Linear(24, 24)",
                                 "holds parameters or buffers the model does not"),
    # a factory given a size read from a value (torch's TypeError named neither; session 57)
    "ones of a value's size": ("y = self.fc(x)\nreturn y @ torch.ones(y.shape[1], 4, device=y.device)",
                               "torch.ones(y.shape[1], 4", "a size read from a traced value"),
    "zeros of a value's size()": ("y = self.fc(x)\nreturn y + torch.zeros(y.size(0), y.size(1), device=y.device)",
                                  "torch.zeros(y.size(0)", "a size read from a traced value"),
    "randn of a value's size": ("y = self.fc(x)\nreturn y @ torch.randn(y.shape[1], 4, device=y.device)",
                                "torch.randn(y.shape[1]", "a size read from a traced value"),
}


@pytest.mark.parametrize("name", sorted(FX_REFUSALS))
def test_what_fx_cannot_trace_is_refused_by_line_in_kgens_words(name, tmp_path):
    body, line, said = FX_REFUSALS[name]
    path = tmp_path / "fx.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), helpers="").replace(
        "self.act = nn.GELU()", "self.act = nn.GELU()\n        self.seq = nn.Sequential(nn.ReLU(), nn.Tanh())"))
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert f"`" in r.output and line in r.output and said in r.output and "Proxy" not in r.output, r.output


@pytest.mark.parametrize("body", ["return torch.softmax(self.fc(x) + x.mean(1, keepdim=True), dim=1)",
                                  "y = self.fc(x)\nreturn F.layer_norm(y + x.sum(1, keepdim=True), (24,))"])
def test_a_row_op_of_a_value_reading_the_input_says_so(body, tmp_path):
    """A residual with the module's input, then a reduction or a norm: refused as what it is (kgen
    reads the input in the point-wise ops after the last row op only), not as 'not (batch, features)'."""
    with pytest.raises(Unsupported, match="reads the module's input"):
        trace(write(tmp_path, "residual", body))
