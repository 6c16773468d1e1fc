"""What session 53's probe of modules others write found (CPU), generated as spellings:

- a branch on what the process is doing (torch.is_grad_enabled(), inference mode,
  torch.compiler.is_compiling(), torch.jit.is_scripting() / is_tracing(), deterministic
  algorithms): fx runs forward's Python once, so the trace baked one side in, and the file
  computed the grad-enabled side under torch.no_grad() too, as KernelBench's eval calls it (a
  wrong result). Now each query the forward reads is traced again with its other answer, and a
  forward whose ops differ is refused, naming the query and its line. torch.cuda.is_available()
  has one answer where the emitted file runs: True.
- a residual written before the GEMM (`0.5 * x + torch.tanh(self.fc(x))`) was refused where the
  same sum written after it was taken: an op on the input alone is now deferred to its first use,
  as an op on parameters alone was. One the GEMM reads is still refused.
- the input moved to a device named in __init__ (`self.device = "cuda" if
  torch.cuda.is_available() else "cpu"`, x.to(self.device), x.cuda()): refused as an op before
  the GEMM; now the identity (a value moved to the host after the GEMM is refused).
- a dict returned: a KeyError's traceback; now the refusal tuples and lists get.
- a refusal of the lowering (after the trace) printed click's usage banner; now `kgen: FILE:
  reason` and exit 2, as every other refusal. LayerNorm over y.shape printed a marker's repr; a
  LazyLinear was refused as a module with a forward hook (its own).
Accepted spellings are checked against the module (fp64, training and eval, gradients against
torch.autograd) and trace to the IR of their plain form.
"""

import textwrap

import pytest
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import ENVIRONMENT_QUERIES, trace
from kgen.ir.graph import Unsupported

from test_spellings_ops import canonical, check

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
{init}
    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 16]
"""


def write(tmp_path, name: str, body: str, init: str = "") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), init=textwrap.indent(init, " " * 8)))
    return Reference(path)


# ---- what the process is doing ---------------------------------------------------------------
# (the query as the forward spells it, the ENVIRONMENT_QUERIES name)
QUERIES = [("torch.is_grad_enabled()", "torch.is_grad_enabled()"),
           ("torch.is_inference_mode_enabled()", "torch.is_inference_mode_enabled()"),
           ("torch.compiler.is_compiling()", "torch.compiler.is_compiling()"),
           ("torch.jit.is_scripting()", "torch.jit.is_scripting()"),
           ("torch.jit.is_tracing()", "torch.jit.is_tracing()"),
           ("torch.are_deterministic_algorithms_enabled()", "torch.are_deterministic_algorithms_enabled()")]
BRANCHES = {
    "if": "y = self.fc(x)\nif {q}:\n    y = y * 2\nreturn y",
    "if not": "y = self.fc(x)\nif not {q}:\n    y = torch.relu(y)\nreturn y",
    "conditional expression": "y = self.fc(x)\nreturn y * (2.0 if {q} else 1.0)",
    "in a helper": "def helper(y):\n    return torch.tanh(y) if {q} else y\nreturn helper(self.fc(x))",
}


def test_every_query_is_one_torch_has():
    for name, (owner, attr, answer, other) in ENVIRONMENT_QUERIES.items():
        assert callable(getattr(owner, attr)), name
        assert isinstance(answer, bool) and isinstance(other, bool)


@pytest.mark.parametrize("query, name", QUERIES)
@pytest.mark.parametrize("branch", sorted(BRANCHES))
def test_a_branch_on_what_the_process_is_doing_is_refused(query, name, branch, tmp_path):
    ref = write(tmp_path, "branch", BRANCHES[branch].format(q=query))
    with pytest.raises(Unsupported) as e:
        trace(ref)
    assert f"branches on {name}" in str(e.value) and "line " in str(e.value)
    # and torch's own answers are what they were after the trace
    import torch
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    assert not torch.compiler.is_compiling() and not torch.jit.is_scripting()


@pytest.mark.parametrize("query, name", QUERIES)
def test_a_query_whose_answer_changes_nothing_is_taken(query, name, tmp_path):
    """Read, but both sides compute the same ops: the module is taken, as its plain form."""
    ref = write(tmp_path, "same", f"y = self.fc(x)\nflag = {query}\nreturn torch.tanh(y) if flag or True else y")
    check(ref)
    plain = write(tmp_path, "plain", "return torch.tanh(self.fc(x))")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


@pytest.mark.parametrize("spelling", ["if torch.cuda.is_available():\n    y = y.clamp(min=0)",
                                      "y = y.clamp(min=0) if torch.cuda.is_available() else y"])
def test_a_branch_on_cuda_takes_the_gpus_side(spelling, tmp_path):
    """The emitted file runs on a GPU: the GPU's side of the branch, what the module computes there."""
    ref = write(tmp_path, "cuda", f"y = self.fc(x)\n{spelling}\nreturn y")
    plain = write(tmp_path, "plain", "return self.fc(x).clamp(min=0)")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


# ---- the input used before the GEMM ------------------------------------------------------------
FIRST = {
    "scaled residual first": ("r = 0.5 * x\nreturn r + torch.tanh(self.fc(x))", "y = torch.tanh(self.fc(x))\nreturn 0.5 * x + y"),
    "residual first": ("return x + self.fc(x)", "y = self.fc(x)\nreturn x + y"),
    "a parameter and the input": ("r = x * self.scale\ny = self.fc(x)\nreturn y - r", "return self.fc(x) - x * self.scale"),
    "a chain on the input": ("r = torch.sigmoid(x) * 2.0\nr = r + 1.0\nreturn torch.relu(self.fc(x)) * r",
                             "return torch.relu(self.fc(x)) * (torch.sigmoid(x) * 2.0 + 1.0)"),
    "a method on the input": ("r = x.mul(0.25)\nreturn self.fc(x) + r", "return self.fc(x) + x * 0.25"),
    "read twice": ("r = x.abs()\nreturn self.fc(x) * r + r", "y = self.fc(x)\nr = x.abs()\nreturn y * r + r"),
}


@pytest.mark.parametrize("case", sorted(FIRST))
def test_an_op_on_the_input_before_the_gemm_is_taken_where_it_is_used(case, tmp_path):
    spelled, plain = FIRST[case]
    ref = write(tmp_path, "first", spelled)
    check(ref)
    assert canonical(trace(ref).describe()) == canonical(trace(write(tmp_path, "plain", plain)).describe())


# (The input scaled by a number, self.fc(x * 2.0), F.linear(x * self.scale, W) of a 0-d scale, is
# taken since session 57: test_spellings_ops' GEMM spellings. Other ops on the input the GEMM reads,
# tanh(x), x + 2.0, x * x, since session 62: a prologue, tests/test_spellings_probe62_prologue.py.)


# ---- devices -----------------------------------------------------------------------------------
MOVES = ["x = x.to(self.device)", "x = x.to('cuda')", "x = x.to(device='cuda:0')", "x = x.cuda()",
         "x = x.to(torch.device('cuda'))", "x = x.to(self.device, non_blocking=True)", "x = x.to('cpu')"]


@pytest.mark.parametrize("move", MOVES)
def test_the_input_moved_to_a_device_is_the_input(move, tmp_path):
    import torch

    ref = write(tmp_path, "moved", f"{move}\nreturn torch.relu(self.fc(x))")
    if "cuda" not in move or torch.cuda.is_available():   # (the module itself runs where it moves x)
        check(ref)
    plain = write(tmp_path, "plain", "return torch.relu(self.fc(x))")
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


def test_a_device_chosen_in_init_is_no_hyperparameter(tmp_path):
    """self.device ("cpu" where the file is generated without a GPU, "cuda" where it runs) moves
    the input only: the emitted forward does not compare it with the traced value (it did, and
    raised on the GPU for every call)."""
    ref = write(tmp_path, "moved", "x = x.to(self.device)\nreturn torch.relu(self.fc(x)) * self.scale")
    assert trace(ref).hyperparameters == []
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out), "--results-dir", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    assert "synthesized for device=" not in out.read_text()


@pytest.mark.parametrize("move", ["y = y.to('cpu')", "y = y.to(torch.device('cpu'))"])
def test_a_value_moved_to_the_host_is_refused(move, tmp_path):
    with pytest.raises(Unsupported, match="moved to the host"):
        trace(write(tmp_path, "host", f"y = self.fc(x)\n{move}\nreturn y"))


# ---- refusals that say what they are -----------------------------------------------------------
@pytest.mark.parametrize("ret", ['{"logits": y, "probs": y.softmax(-1)}', "[y]", "(y, y.sum(1))"])
def test_several_outputs_are_refused_not_a_traceback(ret, tmp_path):
    with pytest.raises(Unsupported, match="kgen's files return one tensor computed from the GEMM"):
        trace(write(tmp_path, "several", f"y = self.fc(x)\nreturn {ret}"))


def test_a_lazy_module_is_refused_as_one(tmp_path):
    ref = write(tmp_path, "lazy", "return torch.relu(self.lazy(x))", init="self.lazy = nn.LazyLinear(16)")
    with pytest.raises(Unsupported, match=r"'lazy' is a lazy module \(LazyLinear\).*write nn.Linear"):
        trace(ref)


def test_layer_norm_over_the_values_shape_says_so(tmp_path):
    with pytest.raises(Unsupported) as e:
        trace(write(tmp_path, "ln", "y = self.fc(x)\nreturn F.layer_norm(y, y.shape)"))
    assert "whole shape" in str(e.value) and "_Marker" not in str(e.value)


def test_a_refusal_after_the_trace_exits_2_naming_the_file(tmp_path):
    """The lowering's refusals (here a BatchNorm after a GroupNorm's row statistics) print like
    the tracer's: `kgen: FILE: reason`, exit 2, no usage banner (the command line was right)."""
    ref = write(tmp_path, "late", "return self.bn(self.gn(self.fc(x)))",
                init="self.gn = nn.GroupNorm(4, 16)\nself.bn = nn.BatchNorm1d(16)")
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(tmp_path / "out.py"),
                                  "--results-dir", str(tmp_path / "results")])
    assert r.exit_code == 2, r.output
    assert f"kgen: {ref.path}: line " in r.output and "Usage:" not in r.output


@pytest.mark.parametrize("buffer, kind", [("self.register_buffer('s', torch.tensor(2.0, dtype=torch.float64))", "buffer"),
                                          ("self.register_buffer('s', torch.tensor([2, 3]))", "buffer"),
                                          ("self.s = nn.Parameter(torch.tensor(2.0, dtype=torch.float64))", "parameter")])
def test_a_tensor_of_another_dtype_is_named_for_what_it_is(buffer, kind, tmp_path):
    with pytest.raises(Unsupported, match=f"the {kind} s is torch.(float64|int64); kgen reads parameters and buffers"):
        trace(write(tmp_path, "dtype", "return self.fc(x) * self.s", init=buffer))


@pytest.mark.parametrize("util", ["weight_norm", "spectral_norm"])
def test_the_old_weight_utilities_are_named_with_their_replacement(util, tmp_path):
    """torch.nn.utils.weight_norm / spectral_norm (a forward pre hook): refused, pointing to their
    torch.nn.utils.parametrizations forms, which kgen takes (tests/test_styles.py)."""
    ref = write(tmp_path, "old", "return torch.relu(self.fc(x))", init=f"self.fc = torch.nn.utils.{util}(self.fc)")
    with pytest.raises(Unsupported, match=f"under torch.nn.utils.{util}.*parametrizations.{util}"):
        trace(ref)


# ---- state the forward changes (the second probe) ----------------------------------------------
STATE = {
    "a counter": ("self.calls = 0", "self.calls += 1\nreturn self.fc(x) * self.calls", "changes self.calls"),
    "a first-call flag": ("self.first = True", "y = self.fc(x)\nif self.first:\n    self.first = False\n    return y\n"
                          "return torch.relu(y)", "changes self.first"),
    "a list": ("self.hist = []", "self.hist.append(1)\nreturn self.fc(x) * len(self.hist)", "changes self.hist"),
    "a dict": ("self.cfg = {'s': 1.0}", "self.cfg['s'] *= 2\nreturn self.fc(x) * self.cfg['s']", "changes self.cfg"),
    "a submodule's setting": ("self.act = nn.LeakyReLU(0.1)", "self.act.negative_slope *= 2\nreturn self.act(self.fc(x))",
                              "changes self.act.negative_slope"),
    "BatchNorm's momentum": ("self.bn = nn.BatchNorm1d(16)", "self.bn.momentum = 0.5\nreturn self.bn(self.fc(x))",
                             "changes self.bn.momentum"),
    "a tensor attribute in place": ("self.s = torch.ones(16)", "self.s.mul_(0.5)\nreturn self.fc(x) * self.s",
                                    "writes the tensor self.s in place"),
    "a tensor attribute rebound": ("self.s = torch.ones(16)", "self.s = self.s * 0.5\nreturn self.fc(x) * self.s",
                                   "changes self.s"),
}


@pytest.mark.parametrize("case", sorted(STATE))
def test_state_the_forward_changes_is_refused(case, tmp_path):
    """fx runs forward's Python once: a value the forward changes was frozen at its first call's
    (a counter, a flag, BatchNorm's momentum set in forward), or, for a plain tensor attribute
    written in place, left out (a wrong result from the first call)."""
    init, body, said = STATE[case]
    with pytest.raises(Unsupported, match=f"the forward {said}: state kept from call to call"):
        trace(write(tmp_path, "state", body, init=init))


def test_state_read_and_left_alone_is_taken(tmp_path):
    ref = write(tmp_path, "read", "return self.fc(x) * self.cfg['s'] * len(self.hist) + self.s",
                init="self.cfg = {'s': 2.0}\nself.hist = [1, 2]\nself.register_buffer('s', torch.ones(16))")
    check(ref)


def test_seeding_in_forward_is_refused_at_its_line(tmp_path):
    import torch

    body = "y = self.fc(x)\ntorch.manual_seed(0)\nreturn F.dropout(y, 0.5, self.training)"
    torch.manual_seed(1234)
    with pytest.raises(Unsupported, match=r"line \d+: `torch.manual_seed\(0\)`: the forward seeds torch's random"):
        trace(write(tmp_path, "seed", body))
    assert torch.initial_seed() == 1234   # (the trace did not seed the generator itself)


@pytest.mark.parametrize("body, said", [
    ("y = self.fc(x)\nreturn y / y.var(0, keepdim=True).sqrt()", "var over dim=0; kgen reduces rows"),
    ("y = self.fc(x)\nreturn y - y.std(dim=0)", "std over dim=0; kgen reduces rows"),
    ("y = self.fc(x)\nreturn torch.tanh(y.unsqueeze(0)).squeeze(0)", "unsqueeze(0) of a (batch, features) value"),
    ("y = self.fc(x)\nreturn y * len(y)", "len() of a traced value"),
])
def test_refusals_name_the_op_in_the_users_words(body, said, tmp_path):
    """The second probe's messages: var over the batch was called a mean, unsqueeze(0) named an IR
    level, len() gave torch.fx's advice to wrap it."""
    with pytest.raises(Unsupported) as e:
        trace(write(tmp_path, "said", body))
    assert said in str(e.value) and "level" not in str(e.value) and "torch.fx.wrap" not in str(e.value)
