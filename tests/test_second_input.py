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
checks, the operand the kernels get, on a stand-in library; which inputs the backward kernels send a
gradient, each its block of d_input, split alike by the C++ node and the Python vjp; more than the
kernels' slots refused in the backward alone; nvcc compile-only); the models the checks,
bench and the search call with x alone getting the extra inputs. GPU tier: tests/test_second_input_gpu.py.
"""

import copy
import ctypes
import inspect
import shutil
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
     r"returns 2 values \(Tensor, float\): value 2, 2.0, is a number, which Model.forward takes as `scale`; .* "
     r"Write it as a constructor argument \(.* self.scale = scale, forward reads self.scale\), or as a default of "
     r"forward's that get_inputs\(\) leaves out \(def forward\(self, x, scale=2.0\): .*\), or as a tensor of the "
     r"input's rows \(torch.full\(\(8, 1\), 2.0\): read after the GEMM per row\)"),
    ("x, residual, flag", "return self.dense(x) + residual", [R, "True"], ReferenceError,
     r"value 3, True, is a number, which Model.forward takes as `flag`"),
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


@pytest.mark.parametrize("params, extras", [("x, scale=2.0", []), ("x, scale", ["torch.full((batch_size, 1), 2.0)"])])
def test_what_the_number_s_refusal_says_to_write_is_taken(params, extras, tmp_path):
    """The spellings the refusal of a number among get_inputs() offers: a default of forward's
    that get_inputs() leaves out, a tensor of the input's rows (the constructor argument is any
    module's attribute): traced, the oracle the module's."""
    SPELLINGS["offered"] = (params, "return self.dense(x) * scale", extras)
    try:
        path = module_file(tmp_path, "offered")
    finally:
        del SPELLINGS["offered"]
    check_oracle(Reference(path), training=False)


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
    (a tensor, x's batch, device and dtype, its width, the messages naming x as the reference does) and handed to the kernels as the operand
    the IR reads it by."""
    path = module_file(tmp_path, "bert_output")
    module, library = emitted(path, monkeypatch)
    assert list(inspect.signature(module.ModelNew.forward).parameters) == ["self", "hidden_states", "input_tensor"]
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
        (r[:4], ValueError, r"expects input_tensor \(input 2\) of shape \(batch, features\) with hidden_states's batch, 8, got \(4, 16\)"),
        (r.double(), TypeError, r"expects input_tensor in hidden_states's dtype, torch.float32, got torch.float64"),
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


@pytest.mark.parametrize("params, names", [
    ("hidden, x", ["hidden", "x"]), ("x, w", ["x", "w"]), ("x, operand0", ["x", "operand0"]),
    ("w, x", ["w", "x"]), ("torch, _kgen_checked_input", ["torch", "_kgen_checked_input"]),
    ("*args", ["input0", "input1"]), ("x, gate", ["x", "gate"]), ("input, other", ["input", "other"]),
])
def test_the_emitted_forward_names_its_inputs_as_the_reference_does(params, names, tmp_path, monkeypatch):
    """ModelNew.forward takes every input under the reference's name, even one the body binds
    itself (x, w, operand0) or a global it reads (torch): that forward hands them to the body
    (_kgen_forward, which names them x, input<k>); input<k> for forward(*args). A call by keyword
    hands the kernels what the positional call does, and a check's message names the input as the
    caller does."""
    first, _, second = params.partition(", ")
    SPELLINGS["named"] = (params, f"return self.dense({first if second else 'args[0]'}) * "
                                  f"{second if second else 'args[1]'}", [R])
    try:
        path = module_file(tmp_path, "named")
    finally:
        del SPELLINGS["named"]
    module, library = emitted(path, monkeypatch)
    assert list(inspect.signature(module.ModelNew.forward).parameters) == ["self", *names]
    (low,) = generator.lowered_parts(spec_of(path))
    k = next(j for j, n in enumerate(low.operands) if n.attrs["path"] == input_path(1))
    new = module.ModelNew(IN, OUT).eval()
    x, r = torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
    with torch.no_grad():
        new(x, r)
        assert library.calls[-1][f"operand{k}"] == r.data_ptr() and library.calls[-1]["x"] == x.data_ptr()
        new(**{names[1]: r, names[0]: x})   # (the kernels get each by its name, not its place)
        assert library.calls[-1][f"operand{k}"] == r.data_ptr() and library.calls[-1]["x"] == x.data_ptr()
        with pytest.raises(TypeError, match=rf"expects {names[1]} \(input 2\) a torch.Tensor"):
            new(x, 2.0)
        with pytest.raises(ValueError, match=rf"reads {names[1]} per element|reads {names[1]} of 16 features"):
            new(x, r[:, :5])


@pytest.mark.parametrize("name, sends", [
    ("bert_output", ["<input 1>"]), ("act_plus_residual", ["<input 1>"]), ("detached_residual", []),
    ("row_scale", ["<input 1>"]), ("detached_input_and_residual", ["<input 1>"]),
    # two inputs wanting gradients: the module's and an extra one, two extra ones (per element
    # before a norm, or in the broadcast tail)
    ("input_and_residual", ["<input>", "<input 1>"]), ("gate_then_norm", ["<input 2>", "<input 1>"]),
    ("addcmul", ["<input 2>", "<input 1>"]),
])
def test_each_input_read_after_the_gemm_gets_its_gradient_from_the_kernels(name, sends, tmp_path):
    """The staged kernels (EpilogueParams::d_input, a slot per input) and the broadcast tail (its
    input leaves) send each input read without a detach its gradient, in the operands' order; the
    op's backward returns them for those operands (their gradients' values: the GPU tier)."""
    (low,) = generator.lowered_parts(spec_of(module_file(tmp_path, name)))
    assert backward.unsupported(low) is None
    assert backward.input_gradient_paths(low) == sends
    part = generator.op_part(low)
    operand = {n.attrs["path"]: f"operand{k}" for k, n in enumerate(low.operands) if n.kind == "input"}
    assert f"input_operands={tuple(operand[p] for p in sends)!r}" in part["backward"]["call"]
    assert part["backward"]["need_dinput"] == (" or ".join(
        f"ctx.needs_input_grad[{part['names'].split(', ').index(operand[p])}]" for p in sends) or "False")
    gradients = generator.op_gradients(low)
    for path, name in operand.items():   # (a detached read gets none)
        assert gradients[name] == (("input", sends.index(path)) if path in sends else None), path


@pytest.mark.parametrize("name", ["input_and_residual", "gate_then_norm", "addcmul", "row_scale"])
def test_the_input_gradients_are_split_where_the_kernels_put_them(name, tmp_path, monkeypatch):
    """The C entry points each d_input slot into its one buffer (input_gradient_slot_lines, at
    M * (a N + b)); the file allocates that buffer (_kgen_input_gradient_buffer) and splits it
    (_kgen_input_gradients) into each input's gradient, in its shape: each piece starts where the
    C entry's slot does, for batches and widths other than the traced ones too."""
    import re

    path = module_file(tmp_path, name)
    (low,) = generator.lowered_parts(spec_of(path))
    module, _ = emitted(path, monkeypatch)
    lines = generator.input_gradient_slot_lines(low)
    sends = backward.input_gradient_paths(low)
    assert len(lines) == len(sends) >= 1
    reads = {n.attrs["path"]: n for n in low.operands if n.kind == "input"}
    traced_n = low.traced.out_features
    for M, N in [(1, traced_n), (7, traced_n)] + ([(5, 40)] if not low.tail else []):
        shapes = [(M, N if reads[p].level == "tile" else int(reads[p].shape[1])) for p in sends]
        args = {f"r{j}": torch.empty(shape) for j, shape in enumerate(shapes)}
        buffer = module._kgen_input_gradient_buffer(args, tuple(args), torch.empty(M, 1))
        assert buffer.dtype == torch.float32 and buffer.numel() == sum(M * w for _, w in shapes)
        assert torch.all(buffer == 0)   # (the kernels add into it)
        buffer = torch.arange(buffer.numel(), dtype=torch.float32)
        pieces = module._kgen_input_gradients(buffer, tuple(args.values()))
        for slot, (line, piece, shape) in enumerate(zip(lines, pieces, shapes)):
            a, b = map(int, re.search(rf"p\.d_input\[{slot}\] = .* \* \((\d+)LL \* N \+ (\d+)\);", line).groups())
            assert tuple(piece.shape) == shape and piece.flatten()[0].item() == M * (a * N + b), (line, M, N)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not on PATH")
@pytest.mark.parametrize("name", ["gate_then_norm", "input_and_residual"])
def test_the_node_and_the_python_vjp_hand_each_input_its_block_of_d_input(name, tmp_path, monkeypatch):
    """Eager training's C++ node (native_backward.cpp, kInputGrad) and the Python vjp (the
    torch.compile path) split the entry's one d_input buffer alike: each input read after the GEMM
    gets its block, in the slots' order (backward.input_gradient_paths), in its shape. The entry
    is test_native_backward's host stand-in, which writes float i + 0.25 (mod 251) at d_input[i]
    (the kernels' values: the GPU tier); the node built with torch's headers (~15 s)."""
    from test_native_backward import _stand_in_library, _stub

    path = module_file(tmp_path, name)
    (low,) = generator.lowered_parts(spec_of(path))
    module = exec_file(generator.render(spec_of(path)))
    library, _, _ = _stand_in_library(module, tmp_path)
    module._kgen_native_module()
    _stub(monkeypatch, module, library)
    M, K, N = 5, SAME_WIDTH_IN(path), OUT
    sends = backward.input_gradient_paths(low)
    assert len(sends) == 2
    ctypes.c_longlong.in_dll(library, "d_input_floats").value = len(sends) * M * N
    gen = torch.Generator().manual_seed(0)
    args = {"x": torch.randn(M, K, generator=gen), "w": torch.randn(N, K, generator=gen)}
    operand = {}
    for k, n in enumerate(low.operands):
        args[f"operand{k}"] = torch.randn((M, N) if n.kind == "input" else (N,), generator=gen)
        operand[n.attrs["path"]] = f"operand{k}"
    g = torch.randn(M, N, generator=gen)

    def gradients():
        leaves = {name: t.clone().requires_grad_() for name, t in args.items()}
        x, w = leaves.pop("x"), leaves.pop("w")
        out = module._kgen_part_call(0, x, w, training=1, autocast=0, keep_z=1, **leaves)[0]
        grads = torch.autograd.grad(out, [leaves[operand[p]] for p in sends], g)
        return out.grad_fn.name(), grads

    written = (torch.arange(len(sends) * M * N) % 251).float() + 0.25
    node, native = gradients()
    assert "PartNode" in node
    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    node, python = gradients()
    assert "PartNode" not in node
    for slot, (a, b) in enumerate(zip(native, python)):
        block = written[slot * M * N:(slot + 1) * M * N].view(M, N)
        assert torch.equal(a, block) and torch.equal(b, block), sends[slot]


def test_more_inputs_wanting_gradients_than_the_kernels_have_slots_are_refused_in_the_backward(tmp_path):
    """kgen::kMaxInputGradients (kernels/common.cuh, read by backward.max_input_gradients) inputs
    send gradients at once; a part reading more has a forward and a backward that raises naming them."""
    count = backward.max_input_gradients() + 1
    names = [f"r{k}" for k in range(1, count + 1)]
    SPELLINGS["many"] = (", ".join(["x", *names]), "return self.LayerNorm(self.dense(x) + " + " + ".join(
        f"{k} * {n}" for k, n in enumerate(names, 1)) + ")", [R] * count)
    try:
        path = module_file(tmp_path, "many")
    finally:
        del SPELLINGS["many"]
    (low,) = generator.lowered_parts(spec_of(path))
    named = ", ".join(f"get_inputs()' tensor {k}" for k in range(2, count + 2))
    assert backward.unsupported(low) == (f"no backward kernel yet for the gradients of more than {count - 1} inputs "
                                         f"read after the GEMM ({named}); train with the reference module")
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
        with pytest.raises(ValueError, match=r"expects input_tensor of hidden_states's leading dimensions, \(8, 3\), and its "
                                             r"own last, got \(3, 8, 16\)"):
            new(x, r.transpose(0, 1))


LEADS_MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.dense = nn.Linear(intermediate, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, hidden_states, input_tensor):
        B, S, D = hidden_states.shape
        h = self.dense(hidden_states.reshape(B * S, D)).reshape(B, S, -1)
        return self.LayerNorm(h + {residual})


def get_inputs():
    return [torch.randn(4, 3, {k}), torch.randn(4, 3, {n})]


def get_init_inputs():
    return [{n}, {k}]
'''


def leads_file(tmp_path, residual: str = "input_tensor") -> str:
    """BertOutput written over its (batch, tokens, features) input's sizes (`B, S, D = x.shape`,
    Tracer.leads) with a (batch, tokens, N) residual."""
    path = tmp_path / "leads.py"
    path.write_text(LEADS_MODULE.format(residual=residual, k=IN, n=OUT))
    return str(path)


def test_an_extra_input_beside_a_forward_that_reads_its_input_s_sizes(tmp_path, monkeypatch):
    """`B, S, D = x.shape` with a residual: traced on the rows as without one; trace._check_leads
    runs the module on (B, S, .) inputs, the residual too, against the IR on their rows; the
    oracle and its gradients are the module's in fp64; the checks' models called with rows x
    alone give the module x and the residual as one sample of their rows; the emitted forward
    takes both as their rows, under the reference's names."""
    ref = Reference(leads_file(tmp_path))
    graph = trace(ref)
    assert graph.leads == 2 and [n.attrs["index"] for n in graph.nodes if n.kind == "input"] == [1]
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x, r = torch.randn(2, 5, IN, dtype=torch.float64), torch.randn(2, 5, OUT, dtype=torch.float64)
    g = torch.randn(2, 5, OUT, dtype=torch.float64)
    leaves = [x.clone().requires_grad_(), r.clone().requires_grad_()]
    expect = torch.autograd.grad(model(*leaves), leaves + list(model.parameters()), g)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x.reshape(-1, IN), model, r.reshape(-1, OUT)),
                                   model(x, r).reshape(-1, OUT), rtol=1e-10, atol=1e-12)
        grad_x, grads = graph_vjp(graph, x.reshape(-1, IN), model, g.reshape(-1, OUT), r.reshape(-1, OUT))
    torch.testing.assert_close(grad_x, expect[0].reshape(-1, IN), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(grads[input_path(1)], expect[1].reshape(-1, OUT), rtol=1e-9, atol=1e-10)
    for (name, _), e in zip(model.named_parameters(), expect[2:]):
        torch.testing.assert_close(grads[name], e, rtol=1e-9, atol=1e-10, msg=name)
    # the checks' call with rows x alone
    given = ref.given_extra_inputs(ref.Model)(*ref.init_args()).double()
    given.load_state_dict(model.state_dict())
    rows = torch.randn(7, IN, dtype=torch.float64)
    with torch.no_grad():
        (drawn,) = ref.extra_inputs_for(rows)
        assert torch.equal(given(rows), model(rows[None], drawn[None])[0])
    # the emitted file
    spec = Spec.of(leads_file(tmp_path), 12, IN, OUT, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    text = generator.render(spec)
    assert check_emitted(text) == []
    module = exec_file(text)
    library = launch_on_cpu(module, monkeypatch)
    monkeypatch.setattr(module, "_kgen_checked_input", lambda x, weight: x)
    assert list(inspect.signature(module.ModelNew.forward).parameters) == ["self", "hidden_states", "input_tensor"]
    (low,) = generator.lowered_parts(spec)
    k = next(j for j, n in enumerate(low.operands) if n.attrs["path"] == input_path(1))
    new = module.ModelNew(OUT, IN).eval()
    x32, r32 = x.float(), r.float()
    with torch.no_grad():
        assert tuple(new(hidden_states=x32, input_tensor=r32).shape) == (2, 5, OUT)
    assert library.calls[-1]["M"] == 10 and library.calls[-1][f"operand{k}"] == r32.data_ptr()


def test_an_extra_input_read_over_a_leading_dimension_is_refused(tmp_path):
    """A residual the forward reduces over the tokens (a leading dimension, which its rows do not
    have) is refused, naming the line (else _check_leads, running the module both ways with the
    residual, would)."""
    with pytest.raises(Unsupported, match=r"line 15: `return self.LayerNorm\(h \+ input_tensor.mean\(1, keepdim=True\)\)`"):
        trace(Reference(leads_file(tmp_path, "input_tensor.mean(1, keepdim=True)")))


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


def test_bench_s_training_step_computes_every_input_s_gradient(tmp_path):
    """bench --training's step (bench.training_step) of a module with an input after x: the
    inputs after x, passed as leaves that want their gradient, get it in each step, as x does,
    from a fresh start each time (before: the step called the model with x alone, the extras
    drawn inside without a gradient, so the step timed less than a layer's training does)."""
    from kgen.check.bench import training_step
    from kgen.check.loading import EmittedFile

    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", module_file(tmp_path, "bert_output"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    f = EmittedFile(out)
    torch.manual_seed(0)
    model = f.Model(*f.init_args()).double().eval()   # (BertOutput's Dropout: one answer)
    x = torch.randn(5, IN, dtype=torch.float64, requires_grad=True)
    extras = [e.detach().clone().requires_grad_() for e in f.reference.extra_inputs_for(x)]
    g = torch.randn(5, OUT, dtype=torch.float64)
    step = training_step(model, g, extras)
    for _ in range(2):   # (the second step's gradients are its own, not added to the first's)
        step(x)
        leaf = extras[0].detach().clone().requires_grad_()
        expect = torch.autograd.grad(f.reference.Model.forward(model, x, leaf), leaf, g)[0]
        assert extras[0].grad is not None and torch.allclose(extras[0].grad, expect)
        assert x.grad is not None and all(p.grad is not None for p in model.parameters())


def test_the_checks_that_draw_x_otherwise_draw_the_extra_inputs_alike(tmp_path):
    """validate's randn and offset calls draw get_inputs()' tensors after x as they draw x, at its
    rows, device and dtype (_extra_inputs); its torch.rand calls leave them to the models (the
    reference's own draws, Reference.extra_inputs_for), as for a module with x alone."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import LARGE_OFFSET, _extra_inputs

    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", module_file(tmp_path, "gate_then_norm"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    f = EmittedFile(out)
    x = torch.rand(5, IN, dtype=torch.float64)
    assert _extra_inputs(f, x, "rand") is None
    torch.manual_seed(0)
    normal = _extra_inputs(f, x, "randn")
    offset = _extra_inputs(f, x, "offset")
    for drawn in (normal, offset):
        assert [tuple(t.shape) for t in drawn] == [(5, OUT), (5, OUT)] and all(t.dtype == x.dtype for t in drawn)
    assert normal[0].min() < 0 and not torch.equal(normal[0], normal[1])
    assert all(LARGE_OFFSET <= t.min() and t.max() < LARGE_OFFSET + 1 for t in offset)


def test_the_search_probe_runs_the_module_with_its_extra_inputs():
    """search.probe_maths runs the reference in fp64 on its get_inputs() (here on the CPU): the
    extra inputs too; the rounding of the GEMM's operands, not their absence, is its error."""
    from kgen.tune.search import probe_maths

    folder = Path(__import__("tempfile").mkdtemp())
    found = probe_maths(module_file(folder, "bert_output"), BATCH, IN, OUT, ["tf32", "bf16"], [1e-4, 1e-2], "cpu")
    assert set(found) == {"tf32", "bf16"}
    assert found["tf32"][0] == [1e-2] and found["bf16"][0] in ([], [1e-2]), found


# ---- nvcc, compile only ------------------------------------------------------------------------
COMPILED = [("bert_output", "wgmma"), ("act_plus_residual", "kgen"), ("input_and_residual", "wgmma"),
            ("addcmul", "kgen")]


def _source(name: str, backend: str, folder) -> str:
    return generator.render_cuda_source(spec_of(module_file(folder, name), backend))


@nvcc_prefetch(lambda p: sm90a_check(_source(p["name"], p["backend"], prefetch_dir("second_input", p))))
@pytest.mark.parametrize("name, backend", COMPILED, ids=["rows_wgmma", "tail_mma", "two_rows_wgmma", "two_tail_mma"])
def test_the_extra_input_read_and_its_gradient_compile(name, backend):
    from test_compile import NVCC, SM90A, compile_check, spills

    source = _source(name, backend, prefetch_dir("second_input", {"name": name, "backend": backend}))
    # (each input's slot of d_input: the stages add into it per element, the tail through kInputSlot)
    slots = 2 if name in ("input_and_residual", "addcmul") else 1
    assert [f"p.d_input[{j}] = d_input == nullptr" in source for j in range(3)] == [j < slots for j in range(3)]
    assert ("p.d_input[1][" in source) == (name == "input_and_residual")
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source, (SM90A,))) == []
