"""A module with tensor inputs after its first: `forward(self, x, residual)`, HuggingFace's
BertSelfOutput / BertOutput (`LayerNorm(dropout(dense(h)) + input_tensor)`), `act(fc(x)) + residual`,
`fc(x) * gate`, `torch.addcmul`. get_inputs()' tensors after the first are read after the GEMM,
per element, as the module's own input is read there (an `input` node whose `index` is the tensor's
place in get_inputs(), its operand path "<input k>"); the oracle (Graph.interpret) and kgen's
backward specification (graph_vjp) take them and give their gradients.

CPU tier: the oracle against the module in fp64 in training and eval mode and in bf16 / fp16, the
gradients of x, of each extra input and of the parameters against torch.autograd, over generated
spellings; the refusals (an extra input read before the GEMM or fed to one, of a shape that does not
broadcast to the output, a number among get_inputs()); `kgen generate` refusing such a module, in
one line, until the emitted file takes them.
"""

import copy
import textwrap

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference, ReferenceError
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import INPUT_PATH, Unsupported, input_path

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
    "input_and_residual": ("x, residual", "return self.LayerNorm(self.dense(x) + x) * residual + x", [R]),
    "unused_second": ("x, residual", "return self.LayerNorm(self.dense(x))", [R]),
}
SAME_WIDTH = {"input_and_residual"}


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
    assert graph.extra_inputs_read() == used


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
    ("x, residual", "return self.dense(x * residual)", [X], Unsupported, r"an op on the module's input before the GEMM"),
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
])
def test_what_is_not_taken_is_named(params, body, extras, error, said, tmp_path):
    SPELLINGS["refused"] = (params, body, extras)
    try:
        path = module_file(tmp_path, "refused")
    finally:
        del SPELLINGS["refused"]
    with pytest.raises(error, match=said):
        trace(Reference(path))


def test_generate_refuses_a_module_of_two_inputs_in_one_line(tmp_path):
    """The emitted file, validate and bench take the module's input alone so far: kgen generate
    says so, and writes nothing."""
    out = tmp_path / "out.py"
    result = CliRunner().invoke(main, ["generate", module_file(tmp_path, "bert_output"), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "get_inputs() gives 2 tensors" in result.output and "one input tensor only" in result.output
    assert "Traceback" not in result.output and not out.exists()
