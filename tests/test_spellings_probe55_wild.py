"""What session 55's probe of modules written as real codebases write them found (CPU).

The spellings are generated (tests/wild_spellings.py) by combining independent axes: how the
constructor gets its sizes and activation (positional args, a dataclass, a SimpleNamespace, a dict,
a PretrainedConfig-lookalike with **kwargs), how the activation is resolved (ACT2FN of modules, a
ClassInstantier, getattr(F, name), getattr(nn, name)(), functools.partial, a lambda on self,
act_layer=nn.GELU, static / class methods, a ModuleDict keyed in __init__), how the GEMM is
written (nn.Linear, a hand-declared weight with reset_parameters and kaiming / xavier /
trunc_normal init, a weight stored (in, out), einsum, tensordot, mm, addmm, F.linear without bias
and the bias added later, the bias as a buffer, GPT-2's Conv1D), what surrounds it (timm's Mlp,
torchvision's MLP built in a loop, a ModuleList, HF's intermediate / output blocks, layer scale,
drop path, norm_layer or nn.Identity) and the Python around it (annotations, `from __future__
import annotations`, properties, __constants__, extra_repr, torch.jit.ignore, @torch.no_grad()
helpers, torch._dynamo.disable, super(Model, self).__init__(), a base class's forward). Found:

- a WRONG RESULT: an activation module shared between models (HF-style `ACT2MOD = {"gelu":
  nn.GELU(), "leaky_relu": nn.LeakyReLU(0.2)}` at module level, `self.act = ACT2MOD[name]`): the
  hyperparameter search (trace.hyperparameters_read) moved the shared module's attribute and left
  it moved, so every Model built afterwards in the process computed with LeakyReLU(0.55) (the IR
  with 0.2: the reference itself was wrong for validation), a GELU's approximate stayed
  'none~kgen' (a RuntimeError in the reference's forward), and a later perturbation traced the
  moved module (a spurious `act.inplace` guard). Each moved attribute is now put back.
- refused, common: torch.einsum('...i,oi->...o') / ('...i,io->...o'), the batch as '...' (the
  message also left out the 'bk,kn->bn' form it takes): now the GEMM.
- refused with a misleading message: torch.tensordot(x, W, dims=1 / ([1], [0]) / ([-1], [1])) was
  "an op on the module's input before the GEMM": now the GEMM.
- refused, common: GPT-2's Conv1D as the second GEMM of a chain (`addmm(b, x.view(-1,
  x.size(-1)), W).view(x.size()[:-1] + (nf,))`): the sizes of a value of the closed part were
  refused with its value; they are numbers, now read.
- unclear: timm's drop_path in training mode (drop_prob > 0) was refused as "the attribute .ndim
  is not supported", then "the constant (1,) is not a number"; x.ndim / x.dim() of a value and
  `(1,) * n` are now taken, and the random mask is refused as what it is (new_empty / bernoulli_,
  torch.rand and kin: random numbers drawn in forward, Dropout's masks the only ones kgen
  reproduces). In eval mode, and at drop_prob=0, it is the identity (taken).
- unclear: @torch.no_grad() on forward with a hand-written weight read as self.w.T (or a bias as
  self.b.view(1, -1)) was refused as "a parameter's value computed under torch.no_grad()", with the
  advice to write .detach(); the message now names a view and the no_grad forward (still refused:
  the view would carry a gradient kgen gives and torch does not).

Taken as they were, and checked here (fp64 oracle in training and eval, gradients against
torch.autograd, lowering; a sample generated, its ModelNew built beside the reference under one
seed with the same state_dict, and passing KernelBench's static checker): every config and
activation-resolution style above, hand-declared weights in every layout kgen takes, timm's Mlp,
torchvision's MLP loop, ModuleList / ModuleDict, layer scale, HF's blocks with post-norm residuals,
the decorators and Python forms listed.
Left refused (clear messages, naming construct and line): chunk / split / F.glu of a GEMM's output
(SwiGLU / GLU: the IR had no column halves; taken since session 61, its `half` node, and checked
here with the rest: tests/test_glu.py), two GEMMs of the input side by side (SwiGLU's w1 / w3: taken
since session 62 as one GEMM, tests/test_spellings_probe62_side.py, but where a spelling adds its
bias by an op of its own, x @ W.T + b, before the down projection),
a torch.jit.script function called in forward and @torch.compile on forward (torch.fx cannot trace
either; fx's own message).
"""

import textwrap

import pytest

from kgen.frontend.reference import Reference
from kgen.frontend.trace import einsum_form, trace
from kgen.ir.graph import Unsupported

from test_spellings_ops import canonical, check
from wild_spellings import STRUCTURE_PRELUDE

HEAD = """
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
{prelude}

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
{init}

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 24]
"""


def write(tmp_path, name: str, body: str, init: str = "self.fc = nn.Linear(in_features, out_features)",
          prelude: str = "") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD.format(body=textwrap.indent(body, " " * 8), init=textwrap.indent(init, " " * 8),
                                prelude=prelude))
    return Reference(path)


def describe(ref: Reference) -> str:
    return canonical(trace(ref).describe())


# ---- 1. a module shared between models, moved by the hyperparameter search -------------------
SHARED = 'ACT2MOD = {"gelu": nn.GELU(), "tanh_gelu": nn.GELU(approximate="tanh"), "leaky_relu": nn.LeakyReLU(0.2)}\n'


@pytest.mark.parametrize("name, attribute, value", [("leaky_relu", "negative_slope", 0.2),
                                                    ("gelu", "approximate", "none"),
                                                    ("tanh_gelu", "approximate", "tanh")])
def test_a_shared_activation_is_left_as_it_was_by_the_trace(name, attribute, value, tmp_path):
    """The hyperparameter search moved the shared module's attribute and left it moved: the Model
    built afterwards computed with LeakyReLU(0.55) (the IR with 0.2) or failed (GELU 'none~kgen')."""
    ref = write(tmp_path, "shared", "return self.act(self.fc(x))",
                init=f"self.fc = nn.Linear(in_features, out_features)\nself.act = ACT2MOD['{name}']", prelude=SHARED)
    graph = trace(ref)
    assert getattr(ref.Model(*ref.init_args()).act, attribute) == value
    assert graph.hyperparameters == [(f"act.{attribute}", value)]   # (act.inplace was guarded too)
    check(ref)


# ---- 2. einsum with the batch as '...', tensordot ---------------------------------------------
PARAMS = ("self.w = nn.Parameter(torch.randn(out_features, in_features) * 0.1)\n"
          "self.wt = nn.Parameter(torch.randn(in_features, out_features) * 0.1)\n"
          "self.b = nn.Parameter(torch.randn(out_features))")
GEMMS = {   # (spelling, the plain form of the same GEMM)
    "einsum ...i,oi->...o": ("torch.einsum('...i,oi->...o', x, self.w)", "x @ self.w.t()"),
    "einsum ...i,io->...o": ("torch.einsum('...i,io->...o', x, self.wt)", "x @ self.wt"),
    "einsum ... spaced": ("torch.einsum('... i, o i -> ... o', x, self.w)", "x @ self.w.t()"),
    "tensordot dims=1": ("torch.tensordot(x, self.wt, dims=1)", "x @ self.wt"),
    "tensordot ([1], [0])": ("torch.tensordot(x, self.wt, dims=([1], [0]))", "x @ self.wt"),
    "tensordot ([-1], [-2])": ("torch.tensordot(x, self.wt, ([-1], [-2]))", "x @ self.wt"),
    "tensordot ([-1], [1])": ("torch.tensordot(x, self.w, dims=([-1], [1]))", "x @ self.w.t()"),
    "tensordot [[1], [1]]": ("torch.tensordot(x, self.w, dims=[[1], [1]])", "x @ self.w.t()"),
}


@pytest.mark.parametrize("case", sorted(GEMMS))
def test_einsum_with_an_ellipsis_and_tensordot_are_the_gemm(case, tmp_path):
    spelled, plain = GEMMS[case]
    ref = write(tmp_path, "spelled", f"return torch.tanh({spelled} + self.b)", init=PARAMS)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", f"return torch.tanh({plain} + self.b)", init=PARAMS))


def test_einsum_form_reads_the_ellipsis_as_the_batch():
    assert einsum_form("...i,oi->...o") == "gemm_nk" and einsum_form("...k,kn->...n") == "gemm_kn"
    assert einsum_form("...n,n->...n") == "mul"
    for other in ("...i,...i->...i", "i...,oi->...o", "bi,oi->...o", "...i,o...->...o"):
        assert einsum_form(other) is None, other


@pytest.mark.parametrize("spelled, said", [
    ("torch.tensordot(x, self.w, dims=2)", "dims=2"),
    ("torch.tensordot(x, self.wt, dims=([0], [0]))", "dims=([0], [0])"),
    ("torch.einsum('...i,oi->o', x, self.w)", "kgen takes 'bk,nk->bn'"),
])
def test_other_contractions_are_refused_by_name(spelled, said, tmp_path):
    with pytest.raises(Unsupported) as e:
        trace(write(tmp_path, "other", f"return {spelled} + self.b", init=PARAMS))
    assert said in str(e.value) and "before the GEMM" not in str(e.value)


# ---- 3. sizes of a value of a closed part: GPT-2's Conv1D as the second GEMM -----------------
CONV1D = '''

class Conv1D(nn.Module):
    """GPT-2's Linear, its weight stored (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x
'''


def test_gpt2_mlp_of_two_conv1d_is_taken(tmp_path):
    """c_fc -> gelu_new -> c_proj: the second Conv1D read x.size() of the first part's value after
    its addmm closed that part (refused: "the tensor method .size() is not supported")."""
    ref = write(tmp_path, "gpt2", "h = self.c_fc(x)\nh = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * "
                "(h + 0.044715 * torch.pow(h, 3.0))))\nreturn self.dropout(self.c_proj(h))",
                init="self.c_fc = Conv1D(32, in_features)\nself.c_proj = Conv1D(out_features, 32)\n"
                     "self.dropout = nn.Dropout(0.0)", prelude=CONV1D)
    graph = check(ref)
    assert len(graph.parts) == 2


@pytest.mark.parametrize("read", ["h.size()", "h.shape", "h.size(-1)", "h.ndim", "h.dim()"])
def test_a_closed_values_sizes_are_numbers_its_value_is_refused(read, tmp_path):
    ref = write(tmp_path, "sizes", f"h = torch.relu(self.fc(x))\ny = self.fc2(h)\nn = {read}\n"
                "return y * h", init="self.fc = nn.Linear(in_features, 32)\nself.fc2 = nn.Linear(32, out_features)")
    with pytest.raises(Unsupported, match="a value computed before the GEMM at line .* is used after it"):
        trace(ref)


# ---- 4. timm's drop_path ---------------------------------------------------------------------
# (timm's drop_path and DropPath, as tests/wild_spellings.py writes them for the structures' axis)
DROP_PATH = STRUCTURE_PRELUDE["drop_path"]


def test_drop_path_in_training_is_refused_as_a_random_mask(tmp_path):
    """Was "the attribute .ndim is not supported", then "the constant (1,) is not a number"."""
    ref = write(tmp_path, "dp", "return x + self.drop_path(torch.relu(self.fc(x)))",
                init="self.fc = nn.Linear(in_features, 16)\nself.drop_path = DropPath(0.1)", prelude=DROP_PATH)
    with pytest.raises(Unsupported, match=r"line \d+: `.*drop_path.*`: the tensor method .new_empty\(\) makes a "
                                          r"tensor of unset values.*random mask"):
        trace(ref)


def test_drop_path_at_zero_is_the_identity(tmp_path):
    ref = write(tmp_path, "dp0", "return x + self.drop_path(torch.relu(self.fc(x)))",
                init="self.fc = nn.Linear(in_features, 16)\nself.drop_path = DropPath(0.0)", prelude=DROP_PATH)
    check(ref)


@pytest.mark.parametrize("body, said", [
    ("y = self.fc(x)\nreturn y * torch.rand_like(y)", "torch.rand_like draws random numbers in the forward"),
    ("y = self.fc(x)\nreturn y + torch.randn_like(y) * 0.1", "torch.randn_like draws random numbers"),
    ("y = self.fc(x)\nreturn y * y.new_ones(y.shape).bernoulli_(0.5)", ".bernoulli_() draws random numbers"),
])
def test_random_numbers_drawn_in_forward_are_named(body, said, tmp_path):
    with pytest.raises(Unsupported, match="line ") as e:
        trace(write(tmp_path, "rand", body))
    assert said in str(e.value)


@pytest.mark.parametrize("body, plain", [
    ("y = self.fc(x)\nreturn y * (y.ndim - 1)", "return self.fc(x) * 1"),
    ("y = self.fc(x)\nreturn y.view((y.shape[0],) + (1,) * (y.dim() - 2) + (24,))", "return self.fc(x)"),
])
def test_the_rank_of_a_value_is_a_number(body, plain, tmp_path):
    ref = write(tmp_path, "rank", body)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", plain))


def test_a_view_of_a_parameter_in_a_no_grad_forward_is_named_as_one(tmp_path):
    """@torch.no_grad() on forward with x @ self.w.T: the message spoke of 'a parameter's value
    computed under torch.no_grad()' and said to write .detach(), where the user computed no value."""
    ref = write(tmp_path, "nograd", "return torch.relu(x @ self.w.T + self.b)", init=PARAMS)
    ref.path.write_text(ref.path.read_text().replace("    def forward", "    @torch.no_grad()\n    def forward"))
    with pytest.raises(Unsupported, match=r"a parameter's value or view computed under torch.no_grad\(\) \(self.w.T.*"
                                          r"@torch.no_grad\(\) forward.*read the parameter outside no_grad"):
        trace(Reference(ref.path))


# ---- 5. the generated spellings (tests/wild_spellings.py) ----------------------------------
import random   # noqa: E402

import torch   # noqa: E402
from click.testing import CliRunner   # noqa: E402

import wild_spellings as W   # noqa: E402
from kgen.check.static_checks import check_emitted   # noqa: E402
from kgen.cli import main   # noqa: E402
from test_kernelbench_corpus import KERNELBENCH, kernelbench_checker   # noqa: E402
from test_styles import assert_same_state   # noqa: E402

CASES = W.cases(random.Random(55))
TAKEN = sorted(k for k in CASES if W.expected_refusal(k) is None)
REFUSED = sorted(k for k in CASES if W.expected_refusal(k) is not None)
# A sample generated and built beside the reference (a few seconds each): every config and
# activation-resolution style, the hand-written GEMM layouts, the structures of two GEMMs.
GENERATED = ["pretrained|act2fn_instantier|class:stored_in_out_addmm:kaiming|mlp_timm|none",
             "dataclass|act2fn_instantier|class:conv1d_gpt2:kaiming|mlp_timm|none",
             "namespace|act2mod_shared|linear|plain|none|leaky_relu",
             "dict|act2fn_instantier|linear|plain|none",
             "args|module|class:tensordot_oi:kaiming|plain|none",
             "args|module|inline:stored_in_out_einsum|plain|none",
             "pretrained|act2fn_instantier|class:F_linear:trunc_normal|seq_loop|none",
             "dataclass|act2fn_functions|class:matmul_T:xavier|mlp_timm|future",
             "args|module|linear|residual_postnorm|none"]


def write_case(tmp_path, key: str) -> Reference:
    path = tmp_path / "case.py"
    fields = key.split("|")
    spec = dict(zip(("config", "act", "wt", "structure", "decor"), fields[:5]))
    path.write_text(W.source(**spec, act_name=fields[5] if len(fields) > 5 else None))
    return Reference(path)


def check_case(ref: Reference):
    """test_spellings_ops.check; a module whose forward runs under no_grad has no gradient to
    check, and one with an active Dropout is checked in eval mode (its mask is random)."""
    from test_autodiff import check_module_gradients
    from test_ir import check_oracle
    from kgen.lower import forward as lower

    graph = trace(ref)
    if graph.dropouts:
        check_oracle(ref, False)
        check_module_gradients(ref, False)
    elif "@torch.no_grad()\n    def forward" in ref.source:
        check_oracle(ref, True)
        check_oracle(ref, False)
    else:
        return check(ref)
    lower.lower(graph, fused_stats=True, external_gemm=False)
    return graph


@pytest.mark.parametrize("key", TAKEN)
def test_a_generated_spelling_is_taken_and_computes_the_module(key, tmp_path):
    check_case(write_case(tmp_path, key))


@pytest.mark.parametrize("key", REFUSED)
def test_a_generated_spelling_is_refused_naming_its_construct(key, tmp_path):
    with pytest.raises(Unsupported) as e:
        trace(write_case(tmp_path, key))
    message = str(e.value)
    assert W.expected_refusal(key) in message and "Traceback" not in message


def test_the_probe_covers_a_few_hundred_spellings():
    assert len(CASES) >= 300 and len(TAKEN) >= 250
    for axis, values in (("config", W.CONFIGS), ("act", W.ACTS), ("structure", W.STRUCTURES), ("decor", W.DECORS)):
        assert {CASES[k][axis] for k in CASES} == set(values), axis
    assert {CASES[k]["wt"] for k in CASES} >= set(W.WEIGHTS)


@pytest.mark.parametrize("key", GENERATED)
def test_a_generated_spelling_is_emitted_built_as_the_reference_and_passes_the_checker(key, tmp_path):
    ref = write_case(tmp_path, key)
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out), "--force",
                                  "--results-dir", str(tmp_path / "results")])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert check_emitted(text) == []
    if (KERNELBENCH / "src" / "kernelbench" / "kernel_static_checker.py").is_file():
        valid, errors, _ = kernelbench_checker()(text, backend="cuda", precision="fp32")
        assert valid, errors
    reference: dict = {}
    exec(compile(ref.source, str(ref.path), "exec"), reference)
    torch.manual_seed(42)
    expect = reference["Model"](*reference["get_init_inputs"]()).state_dict()
    emitted: dict = {}
    exec(compile(text, str(out), "exec"), emitted)
    torch.manual_seed(42)
    assert_same_state(emitted["ModelNew"](*emitted["get_init_inputs"]()).state_dict(), expect, key)
