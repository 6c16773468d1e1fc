"""A module with tensor inputs after its first: `forward(self, x, residual)`, HuggingFace's
BertSelfOutput / BertOutput (`LayerNorm(dropout(dense(h)) + input_tensor)`), `act(fc(x)) + residual`,
`fc(x) * gate`, `torch.addcmul`. get_inputs()' tensors after the first are read after the GEMM,
per element, as the module's own input is read there (an `input` node whose `index` is the tensor's
place in get_inputs(), its operand path "<input k>"); the oracle (Graph.interpret) and kgen's
backward specification (graph_vjp) take them and give their gradients.

CPU tier: the oracle against the module in fp64 in training and eval mode and in bf16 / fp16, the
gradients of x, of each extra input and of the parameters against torch.autograd, over generated
spellings; the refusals (an extra input read before the GEMM or fed to one, of a shape that does not
broadcast to the output, a number among get_inputs()); the emitted file (its forward's signature and
checks, the operand the kernels get, on a stand-in library; which input the backward kernels send a
gradient; two that want one refused in the backward alone; nvcc compile-only); the models the checks,
bench and the search call with x alone getting the extra inputs. GPU tier: tests/test_second_input_gpu.py.
"""

import copy
import inspect
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kgen.check.static_checks import check_emitted
from kgen.cli import main
from kgen.codegen import generator
from kgen.frontend.reference import Reference, ReferenceError
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import INPUT_PATH, Unsupported, input_path
from kgen.lower import backward
from kgen.tune.spec import Spec, Tile

from conftest import launch_on_cpu, nvcc_prefetch, prefetch_dir, sm90a_check
from test_render import exec_file

BATCH, IN, OUT = 8, 24, 16

_MODULE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.dense = nn.Linear(in_features, out_features)
        self.LayerNorm = nn.LayerNorm(out_features, eps=1e-12)
        self.dropout = nn.Dropout(0.25)
        {to}

    def forward(self, {params}):
{body}


batch_size = {batch}
in_features = {in_features}
out_features = {out_features}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [in_features, out_features]
'''

X = "torch.randn(batch_size, in_features)"
R = "torch.randn(batch_size, out_features)"
ROWS = "torch.randn(batch_size, 1)"

# name: (forward's parameters, body, get_inputs()' tensors after x). `h` is the GEMM's output.
SPELLINGS = {
    # HuggingFace's BertSelfOutput / BertOutput, as written there
    "bert_output": ("hidden_states, input_tensor",
                    "hidden_states = self.dense(hidden_states)\nhidden_states = self.dropout(hidden_states)\n"
                    "hidden_states = self.LayerNorm(hidden_states + input_tensor)\nreturn hidden_states", [R]),
    "residual_after_layernorm": ("x, residual", "return self.LayerNorm(self.dense(x)) + residual", [R]),
    "residual_in_place": ("x, residual", "h = self.dense(x)\nh += residual\nreturn self.LayerNorm(h)", [R]),
    "act_plus_residual": ("x, residual", "return F.gelu(self.dense(x)) + residual", [R]),
    "residual_first": ("x, residual", "return residual + torch.relu(self.dense(x))", [R]),
    "gate": ("x, gate", "return self.dense(x) * gate", [R]),
    "sigmoid_gate": ("x, gate", "return self.dense(x) * torch.sigmoid(gate)", [R]),
    "addcmul": ("x, residual, gate", "return torch.addcmul(residual, self.dense(x), gate, value=0.5)", [R, R]),
    "gate_then_norm": ("x, residual, gate", "return self.LayerNorm(self.dense(x) * gate + residual)", [R, R]),
    "row_scale": ("x, scale", "return torch.tanh(self.dense(x)) * scale", [ROWS]),
    "softmax_with_mask": ("x, mask", "return torch.softmax(self.dense(x) + mask, dim=-1)", [R]),
    "detached_residual": ("x, residual", "return self.LayerNorm(self.dense(x) + residual.detach())", [R]),
    "cloned_residual": ("x, residual", "return self.dense(x) - residual.clone().contiguous()", [R]),
    "scaled_before_the_gemm": ("x, residual", "r = 0.5 * residual\nh = self.dense(x)\nreturn self.LayerNorm(h + r)", [R]),
    "star_args": ("*args", "h = self.dropout(self.dense(args[0]))\nreturn self.LayerNorm(h + args[1])", [R]),
    # (the module's own input read again too: in_features = out_features, SAME_WIDTH)
    "input_and_residual": ("x, residual", "return self.LayerNorm(self.dense(x) + x + residual)", [R]),
    "detached_input_and_residual": ("x, residual", "return self.LayerNorm(self.dense(x) + x.detach() + residual)", [R]),
    "unused_second": ("x, residual", "return self.LayerNorm(self.dense(x))", [R]),
}
SAME_WIDTH = {"input_and_residual", "detached_input_and_residual"}


def module_file(folder, name: str, in_features: int = IN, out_features: int = OUT, dtype: str = "") -> str:
    params, body, extras = SPELLINGS[name]
    in_features = out_features if name in SAME_WIDTH else in_features
    inputs = ", ".join(t.replace(")", f", dtype={dtype})") if dtype else t for t in [X, *extras])
    path = folder / f"{name}.py"
    path.write_text(_MODULE.format(params=params, body=textwrap.indent(body, " " * 8), batch=BATCH,
                                   to=f"self.to({dtype})" if dtype else "",
                                   in_features=in_features, out_features=out_features, inputs=inputs))
    return str(path)


def drawn(ref: Reference, dtype=torch.float64) -> list[torch.Tensor]:
    """get_inputs()' tensors as the workload takes them, in `dtype`, values in [-1, 1)."""
    torch.manual_seed(3)
    return [(torch.rand(t.shape, dtype=torch.float64) * 2 - 1).to(dtype) for t in ref.inputs()]


def check_oracle(ref: Reference, training: bool, dtype=torch.float64):
    """Graph.interpret against the module on the same inputs, both right after one seed (a Dropout
    training draws the same mask in both): fp64 to 1e-12, a 16-bit module to the bit."""
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).to(dtype).train(training)
    twin = copy.deepcopy(model)
    x, *extras = drawn(ref, dtype)
    with torch.no_grad():
        torch.manual_seed(5)
        expect = model(x, *extras)
        torch.manual_seed(5)
        got = graph.interpret(x, twin, *extras)
    if dtype == torch.float64:
        torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)
    else:
        assert got.dtype == expect.dtype == dtype
        torch.testing.assert_close(got, expect, rtol=0, atol=0)
    return graph


def check_gradients(ref: Reference, training: bool):
    """graph_vjp against torch.autograd of the module in fp64: x, every extra input, every
    parameter (an extra input read detached, or not at all, gets none, as in torch)."""
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    inputs = [t.requires_grad_() for t in drawn(ref)]
    torch.manual_seed(9)
    y = model(*inputs)
    g = torch.randn_like(y)
    names = [name for name, _ in model.named_parameters()]
    expect = torch.autograd.grad(y, inputs + list(model.parameters()), g, allow_unused=True)
    with torch.no_grad():
        torch.manual_seed(9)
        grad_x, grads = graph_vjp(graph, inputs[0].detach(), twin, g, *(t.detach() for t in inputs[1:]))
    torch.testing.assert_close(grad_x, expect[0], rtol=1e-9, atol=1e-10)
    for k, e in enumerate(expect[1:len(inputs)], 1):
        if e is None:
            assert input_path(k) not in grads, k
        else:
            torch.testing.assert_close(grads.pop(input_path(k)), e, rtol=1e-9, atol=1e-10, msg=f"input {k}")
    for name, e in zip(names, expect[len(inputs):]):
        if e is None:
            assert name not in grads
        else:
            torch.testing.assert_close(grads.pop(name), e, rtol=1e-9, atol=1e-10, msg=name)
    assert not grads, sorted(grads)   # (no gradient the module does not give)
    return expect


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_the_oracle_and_its_gradients_are_the_modules(name, tmp_path):
    ref = Reference(module_file(tmp_path, name))
    for training in (True, False):
        graph = check_oracle(ref, training)
        check_gradients(ref, training)
    reads = {n.attrs["index"]: n for n in graph.nodes if n.kind == "input" and n.attrs.get("index")}
    used = 0 if name == "unused_second" else len(SPELLINGS[name][2])
    assert sorted(reads) == list(range(1, used + 1)), graph.describe()
    assert all(n.attrs["path"] == input_path(k) != INPUT_PATH for k, n in reads.items())


@pytest.mark.parametrize("name", ["bert_output", "gate_then_norm", "gate", "act_plus_residual", "residual_in_place"])
@pytest.mark.parametrize("dtype", ["torch.bfloat16", "torch.float16"])
def test_a_16_bit_module_with_a_second_input(name, dtype, tmp_path):
    ref = Reference(module_file(tmp_path, name, dtype=dtype))
    assert all(t.dtype == ref.input.dtype for t in ref.extra_inputs)
    for training in (True, False):
        check_oracle(ref, training, ref.input.dtype)


def test_a_residual_before_a_row_op_is_read_per_element_by_the_stages(tmp_path):
    """Before a norm (or a softmax) the extra input is a tile value, read at (m, n) as the
    module's input is in `norm(x + fc(x))`; with no row op after it, it stays the broadcast tail's."""
    before = trace(Reference(module_file(tmp_path, "bert_output")))
    (read,) = [n for n in before.nodes if n.kind == "input"]
    assert read.level == "tile" and read.attrs["index"] == 1
    after = trace(Reference(module_file(tmp_path, "residual_after_layernorm")))
    (read,) = [n for n in after.nodes if n.kind == "input"]
    assert read.level == "full" and read.shape == ("M", OUT)
    rows = trace(Reference(module_file(tmp_path, "row_scale")))
    (read,) = [n for n in rows.nodes if n.kind == "input"]
    assert read.shape == ("M", 1)


def test_rows_of_an_input_of_more_dimensions(tmp_path):
    """A (batch, tokens, features) input with a (batch, tokens, N) residual: both taken as their
    rows; the oracle on the rows is the module's output reshaped."""
    text = open(module_file(tmp_path, "bert_output")).read().replace(
        "torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)",
        "torch.randn(batch_size, 3, in_features), torch.randn(batch_size, 3, out_features)")
    path = tmp_path / "tokens.py"
    path.write_text(text)
    ref = Reference(str(path))
    assert tuple(ref.input.shape) == (3 * BATCH, IN) and tuple(ref.extra_inputs[0].shape) == (3 * BATCH, OUT)
    x, r = ref.inputs()
    assert tuple(x.shape) == (3 * BATCH, IN) and tuple(r.shape) == (3 * BATCH, OUT)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().eval()
    x3, r3 = torch.randn(BATCH, 3, IN, dtype=torch.float64), torch.randn(BATCH, 3, OUT, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x3.reshape(-1, IN), model, r3.reshape(-1, OUT)),
                                   model(x3, r3).reshape(-1, OUT), rtol=1e-10, atol=1e-12)


def test_the_batch_asked_for_takes_every_input_at_its_rows(tmp_path):
    """--batch where no constant sets it: rows of repeated get_inputs() calls, for the input and
    the residual alike (the same calls: row i of both from one call)."""
    path = tmp_path / "no_constant.py"
    path.write_text(open(module_file(tmp_path, "bert_output")).read().replace("batch_size = 8", "").replace(
        "torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)",
        "*(lambda x: (x, 2 * x[:, :out_features]))(torch.randn(3, in_features))"))
    ref = Reference(str(path), {"batch": 7})
    assert tuple(ref.extra_inputs[0].shape) == (7, OUT)
    x, r = ref.inputs()
    assert tuple(x.shape) == (7, IN) and tuple(r.shape) == (7, OUT)
    # (each call's residual is twice its input's first columns: the rows of both from the same calls)
    assert torch.equal(r, 2 * x[:, :OUT])


@pytest.mark.parametrize("params, body, extras, error, said", [
    ("x, residual", "return self.dense(residual + x)", [X], Unsupported,
     r"an op on an input after the first .* GEMM reads: kgen reads such an input after the GEMM only"),
    ("x, residual", "return self.dense(x * residual)", [X], Unsupported,
     r"an op on an input after the first .* GEMM reads: kgen reads such an input after the GEMM only"),
    ("x, other", "return self.dense(x) + self.dense(other)", [X], Unsupported,
     r"the input of a second GEMM is get_inputs\(\)' tensor 2, an input kgen reads after the GEMM only"),
    ("x, other", "return self.dense(other)", [X], Unsupported,
     r"the GEMM's input is get_inputs\(\)' tensor 2"),
    ("x, residual", "return self.dense(x) + residual", ["torch.randn(batch_size, 7)"], Unsupported,
     r"do not broadcast"),
    ("x, scale", "return self.dense(x) * scale", ["2.0"], ReferenceError,
     r"returns 2 values \(Tensor, float\); kgen takes tensors: the module's input, then"),
    ("x, bias", "return self.dense(x) + bias", ["torch.randn(out_features)"], ReferenceError,
     r"shape \(16,\) .* kgen takes an extra input with the input's rows, \(8, d\)"),
    ("x, residual", "return self.dense(x) + residual", ["torch.randn(batch_size, out_features, dtype=torch.float64)"],
     ReferenceError, r"kgen takes extra inputs in the module input's dtype \(torch.float32\)"),
    ("x", "return self.dense(x)", [R], Unsupported, r"Model.forward takes 1 inputs and get_inputs\(\) gives 2"),
    ("x, scale", "return self.LayerNorm(self.dense(x) * scale)", [ROWS], Unsupported,
     r"LayerNorm of a value that reads get_inputs\(\)' tensor 2, of shape \(batch, 1\) \(before a row op"),
])
def test_what_is_not_taken_is_named(params, body, extras, error, said, tmp_path):
    SPELLINGS["refused"] = (params, body, extras)
    try:
        path = module_file(tmp_path, "refused")
    finally:
        del SPELLINGS["refused"]
    with pytest.raises(error, match=said):
        trace(Reference(path))


# ---- the emitted file ------------------------------------------------------------------------
WGMMA_TILE = Tile(128, 128, 32, 16, 128, stages=4)
MMA_TILE = Tile(128, 128, 32, 64, 32, stages=3)


def spec_of(path: str, backend: str = "wgmma") -> Spec:
    return Spec.of(path, BATCH, SAME_WIDTH_IN(path), OUT, math="tf32x3", backend=backend, fusion=1,
                   tile=WGMMA_TILE if backend == "wgmma" else MMA_TILE)


def SAME_WIDTH_IN(path: str) -> int:
    return OUT if Path(path).stem in SAME_WIDTH else IN


def emitted(path: str, monkeypatch):
    """The emitted file of `path`, run on CPU tensors against a stand-in library (its kernels'
    launch recorded, not run): the Python around the kernels."""
    text = generator.render(spec_of(path))
    assert check_emitted(text) == []
    module = exec_file(text)
    library = launch_on_cpu(module, monkeypatch)
    monkeypatch.setattr(module, "_kgen_checked_input", lambda x, weight: x)
    return module, library


def test_the_emitted_forward_takes_and_checks_the_extra_input_by_its_name(tmp_path, monkeypatch):
    """ModelNew.forward(self, x, input_tensor): the reference's name; the tensor is checked as x is
    (a tensor, x's batch, device and dtype, its width) and handed to the kernels as the operand
    the IR reads it by."""
    path = module_file(tmp_path, "bert_output")
    module, library = emitted(path, monkeypatch)
    assert list(inspect.signature(module.ModelNew.forward).parameters) == ["self", "x", "input_tensor"]
    (low,) = generator.lowered_parts(spec_of(path))
    k = next(j for j, n in enumerate(low.operands) if n.attrs["path"] == input_path(1))
    torch.manual_seed(0)
    new = module.ModelNew(IN, OUT).eval()
    x, r = torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
    with torch.no_grad():
        new(x, r)
    assert library.calls[-1][f"operand{k}"] == r.data_ptr()
    for bad, error, said in [
        (2.0, TypeError, r"expects input_tensor \(input 2\) a torch.Tensor, got float"),
        (r[:4], ValueError, r"expects input_tensor \(input 2\) of shape \(batch, features\) with x's batch, 8, got \(4, 16\)"),
        (r.double(), TypeError, r"expects input_tensor in x's dtype, torch.float32, got torch.float64"),
        (r[:, :5], ValueError, r"reads input_tensor per element as a \(batch, 16\) value; got 5 features"),
    ]:
        with pytest.raises(error, match=said), torch.no_grad():
            new(x, bad)


def test_a_tail_read_of_a_row_wide_input_is_checked_by_its_width(tmp_path, monkeypatch):
    path = module_file(tmp_path, "row_scale")
    module, library = emitted(path, monkeypatch)
    new = module.ModelNew(IN, OUT).eval()
    x = torch.randn(BATCH, IN)
    with torch.no_grad():
        new(x, torch.randn(BATCH, 1))
        with pytest.raises(ValueError, match=r"reads scale of 1 features after the GEMM"):
            new(x, torch.randn(BATCH, OUT))


@pytest.mark.parametrize("params, name", [("hidden, x", "input1"), ("x, w", "input1"), ("x, operand0", "input1"),
                                          ("*args", "input1"), ("x, gate", "gate")])
def test_an_extra_input_named_as_the_forward_names_its_own_values_is_renamed(params, name, tmp_path):
    first, _, second = params.partition(", ")
    SPELLINGS["named"] = (params, f"return self.dense({first if second else 'args[0]'}) * "
                                  f"{second if second else 'args[1]'}", [R])
    try:
        path = module_file(tmp_path, "named")
    finally:
        del SPELLINGS["named"]
    module = exec_file(generator.render(spec_of(path)))
    assert list(inspect.signature(module.ModelNew.forward).parameters) == ["self", "x", name]


@pytest.mark.parametrize("name, sends", [("bert_output", True), ("act_plus_residual", True),
                                         ("detached_residual", False), ("row_scale", True),
                                         ("detached_input_and_residual", True)])
def test_one_input_read_after_the_gemm_gets_its_gradient_from_the_kernels(name, sends, tmp_path):
    """The staged kernels (d_input) and the broadcast tail (its input leaf) send one input its
    gradient: here the extra one, which the op's backward returns for that operand."""
    (low,) = generator.lowered_parts(spec_of(module_file(tmp_path, name)))
    assert backward.unsupported(low) is None
    assert backward.input_gradient(low) == sends
    part = generator.op_part(low)
    k = next(j for j, n in enumerate(low.operands) if n.kind == "input" and n.attrs["path"] == input_path(1))
    assert (f"input_operand='operand{k}'" in part["backward"]["call"]) == sends
    assert (part["backward"]["need_dinput"] != "False") == sends


@pytest.mark.parametrize("name, named", [("input_and_residual", "the module's input and get_inputs()' tensor 2"),
                                         ("gate_then_norm", "get_inputs()' tensor 2 and get_inputs()' tensor 3"),
                                         ("addcmul", "get_inputs()' tensor 2 and get_inputs()' tensor 3")])
def test_two_inputs_sending_gradients_are_refused_in_the_backward_alone(name, named, tmp_path):
    """The kernels send one input's gradient (EpilogueParams::d_input, the tail's input leaf): a
    part that reads two inputs each wanting a gradient (the module's and an extra one, or two extra
    ones; per element before a norm, or in the tail) has a forward and a backward that raises
    naming both; the module's own input detached, it has both (above)."""
    path = module_file(tmp_path, name)
    (low,) = generator.lowered_parts(spec_of(path))
    assert backward.unsupported(low) == (f"no backward kernel yet for the gradients of two inputs read after the "
                                         f"GEMM ({named}); train with the reference module")
    assert check_emitted(generator.render(spec_of(path))) == []


def tokens_file(tmp_path) -> str:
    """BertOutput on a (batch, tokens, features) input and residual, as HuggingFace calls it."""
    text = open(module_file(tmp_path, "bert_output")).read().replace(
        "torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)",
        "torch.randn(batch_size, 3, in_features), torch.randn(batch_size, 3, out_features)")
    path = tmp_path / "tokens.py"
    path.write_text(text)
    return str(path)


def test_extra_inputs_of_an_input_of_more_dimensions_are_taken_as_their_rows(tmp_path, monkeypatch):
    """The file's forward takes x (batch, tokens, K) and the residual (batch, tokens, N) as their
    rows, as eager's module computes on them (trace._check_rows ran it both ways with the
    residual), the output reshaped back; a residual of other leading dimensions is refused."""
    module, library = emitted(tokens_file(tmp_path), monkeypatch)
    (low,) = generator.lowered_parts(spec_of(tokens_file(tmp_path)))
    k = next(j for j, n in enumerate(low.operands) if n.attrs["path"] == input_path(1))
    new = module.ModelNew(IN, OUT).eval()
    x, r = torch.randn(BATCH, 3, IN), torch.randn(BATCH, 3, OUT)
    with torch.no_grad():
        assert tuple(new(x, r).shape) == (BATCH, 3, OUT)
        assert library.calls[-1][f"operand{k}"] == r.data_ptr() and library.calls[-1]["M"] == 3 * BATCH
        with pytest.raises(ValueError, match=r"expects input_tensor of x's leading dimensions, \(8, 3\), and its "
                                             r"own last, got \(3, 8, 16\)"):
            new(x, r.transpose(0, 1))


# ---- validate, bench and the search: the models called with x alone get the extra inputs ----------
def test_the_checks_models_called_with_x_alone_get_every_input(tmp_path, monkeypatch):
    """kgen generate writes the file; EmittedFile's Model and ModelNew, called with x alone (as the
    checks, bench and the search call them, varying x), pass get_inputs()' tensors after it at x's
    rows, device and dtype (Reference.extra_inputs_for); a call with them all is as given."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import _inputs

    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", module_file(tmp_path, "bert_output"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    f = EmittedFile(out)
    x = _inputs(f, "rand", 5, "cpu", torch.float64)
    assert tuple(x.shape) == (5, IN)
    rng = torch.get_rng_state()
    (r,) = f.reference.extra_inputs_for(x)
    assert torch.equal(torch.get_rng_state(), rng)   # (a draw inside a forward moves no Dropout's mask)
    assert tuple(r.shape) == (5, OUT) and r.dtype == torch.float64
    assert f.reference.extra_inputs_for(x)[0] is r   # (the same tensors for a batch, device and dtype)
    # one draw for every dtype of a batch: the fp64 model's values are the fp32 one's (or the
    # 16-bit one's, rounded through it)
    (r32,) = f.reference.extra_inputs_for(x.float())
    assert torch.equal(r32.double(), r)
    (r64,) = f.reference.extra_inputs_for(x, through=torch.bfloat16)
    assert torch.equal(r64, r32.bfloat16().double()) and not torch.equal(r64, r)
    torch.manual_seed(0)
    model = f.Model(*f.init_args()).double().eval()
    plain = f.reference.Model(*f.init_args()).double().eval()
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(model(x), plain(x, r))
        other = torch.randn_like(r)
        assert torch.equal(model(x, other), plain(x, other))
    # ModelNew: the stand-in library records the operand the kernels got
    launch_on_cpu(f.module, monkeypatch)
    monkeypatch.setattr(f.module, "_kgen_checked_input", lambda x, weight: x)
    library = f.module._kgen_build()
    new = f.ModelNew(*f.init_args()).eval()
    x32 = x.float()
    with torch.no_grad():
        new(x32)
    (low,) = generator.lowered_parts(f.spec)
    k = next(j for j, n in enumerate(low.operands) if n.attrs["path"] == input_path(1))
    assert library.calls[-1][f"operand{k}"] == f.reference.extra_inputs_for(x32)[0].data_ptr()


def test_the_search_probe_runs_the_module_with_its_extra_inputs():
    """search.probe_maths runs the reference in fp64 on its get_inputs() (here on the CPU): the
    extra inputs too; the rounding of the GEMM's operands, not their absence, is its error."""
    from kgen.tune.search import probe_maths

    folder = Path(__import__("tempfile").mkdtemp())
    found = probe_maths(module_file(folder, "bert_output"), BATCH, IN, OUT, ["tf32", "bf16"], [1e-4, 1e-2], "cpu")
    assert set(found) == {"tf32", "bf16"}
    assert found["tf32"][0] == [1e-2] and found["bf16"][0] in ([], [1e-2]), found


# ---- nvcc, compile only ------------------------------------------------------------------------
COMPILED = [("bert_output", "wgmma"), ("act_plus_residual", "kgen")]


def _source(name: str, backend: str, folder) -> str:
    return generator.render_cuda_source(spec_of(module_file(folder, name), backend))


@nvcc_prefetch(lambda p: sm90a_check(_source(p["name"], p["backend"], prefetch_dir("second_input", p))))
@pytest.mark.parametrize("name, backend", COMPILED, ids=["rows_wgmma", "tail_mma"])
def test_the_extra_input_read_and_its_gradient_compile(name, backend):
    from test_compile import NVCC, SM90A, compile_check, spills

    source = _source(name, backend, prefetch_dir("second_input", {"name": name, "backend": backend}))
    assert ("p.d_input[" in source) == (name == "bert_output")
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source, (SM90A,))) == []
