"""Session 62's probe (CPU): classification heads that pick one token of a (batch, tokens, features)
input before the Linear, as HuggingFace's BertPooler (`hidden_states[:, 0]`, dense, tanh) and
RobertaClassificationHead (`features[:, 0, :]`, dense, tanh, dropout, out_proj of 2 or 3 labels),
a ViT's CLS head and a decoder's last-token head (`x[:, -1]`) write them, generated over the
index's spellings (x[:, k], x[:, k, :], x[..., k, :], x.select(1, k), x.select(-2, k),
torch.select(x, 1, k), k a literal, a module attribute or a module-level constant, 0, -1 or
another), the forward parameter's name, with and without .contiguous(), the head, and the module's
dtype (float32, and built in bfloat16).

Found: every one refused. `hidden_states[:, 0]` said "indexing that selects elements of a value",
`features[:, 0, :]` "indexing a value: too many indices for tensor of dimension 2" (kgen read the
(B, S, D) input as its rows, (B * S, D), and the index as one of those).

Now: where the module's first GEMM reads one token of the input, (B, D)
(Reference._selected_token, from the forward run on the meta device up to that GEMM), the workload
is that token's rows: batch B, in_features D, get_inputs()' tensor drawn and the token taken
(Reference._rows); the tracer takes the selection as the (batch, features) input and refuses any
other read of the (B, S, D) tensor, naming it (Tracer._on_tokens); the checks give the reference
and the file the input around the rows (Reference.tokens_around: the token at its place, zeros
elsewhere, S the reference's), and the emitted forward takes x.select(1, k) as written, contiguous,
into the kernels. Checked here (check_token_taken): the IR on the token against the module on the
whole random input in fp64 (training and eval), x's gradient against torch.autograd's (the token's,
zeros at every other), the parameters' too, and in bf16 / fp16 against fp64.
"""

import copy
import itertools
import textwrap
import warnings

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

from conftest import launch_on_cpu

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nCLS = 2\n"
SHAPE = (4, 7, 16)   # (batch, tokens, features)

# The selection as written ({x}: the forward's parameter), and the token it picks of SHAPE's 7.
INDEXES = {
    "x[:, 0]": ("{x}[:, 0]", 0),
    "x[:, 0, :]": ("{x}[:, 0, :]", 0),
    "x[:, -1]": ("{x}[:, -1]", 6),
    "x[:, -1, :]": ("{x}[:, -1, :]", 6),
    "x[:, 3]": ("{x}[:, 3]", 3),
    "x[..., 5, :]": ("{x}[..., 5, :]", 5),
    "x.select(1, 0)": ("{x}.select(1, 0)", 0),
    "x.select(-2, -1)": ("{x}.select(-2, -1)", 6),
    "x.select(dim=1, index=4)": ("{x}.select(dim=1, index=4)", 4),
    "torch.select(x, 1, 0)": ("torch.select({x}, 1, 0)", 0),
    "x[:, self.cls_index]": ("{x}[:, self.cls_index]", 1),
    "x[:, CLS] (a module constant)": ("{x}[:, CLS]", 2),
}
# The head after the selection ({sel}: the selected token's name), as (init, body).
HEADS = {
    "pooler": ("self.dense = nn.Linear(hidden_size, hidden_size{dt})\nself.activation = nn.Tanh()",
               "pooled = self.activation(self.dense({sel}))\nreturn pooled"),
    "classification head": ("self.dense = nn.Linear(hidden_size, hidden_size{dt})\nself.dropout = nn.Dropout(0.1)\n"
                            "self.out_proj = nn.Linear(hidden_size, num_labels{dt})",
                            "x = self.dense({sel})\nx = torch.tanh(x)\nx = self.dropout(x)\nx = self.out_proj(x)\nreturn x"),
    "last-token head": ("self.score = nn.Linear(hidden_size, num_labels, bias=False{dt})",
                        "logits = self.score({sel})\nreturn logits"),
    "CLS head, gelu": ("self.head = nn.Linear(hidden_size, num_labels{dt})", "return F.gelu(self.head({sel}))"),
}
NAMES = ("hidden_states", "features", "x", "sequence_output")


def head_source(index: str, head: str, name: str = "hidden_states", contiguous: bool = False,
                dtype: str | None = None, shape=SHAPE, num_labels: int = 3) -> str:
    """A reference whose forward selects one token of its (batch, tokens, features) input by
    `index` (stored under its own name first, .contiguous() or not) and runs `head` on it."""
    dt = f", dtype=torch.{dtype}" if dtype else ""
    init, body = HEADS[head]
    selection = INDEXES[index][0].format(x=name) + (".contiguous()" if contiguous else "")
    body = f"token = {selection}\n" + body.format(sel="token")
    indent = lambda text: textwrap.indent(text, " " * 8)   # noqa: E731
    return (f"{HEADER}\n\nclass Model(nn.Module):\n    def __init__(self, hidden_size={shape[-1]}, num_labels={num_labels}):\n"
            f"        super().__init__()\n        self.cls_index = 1\n{indent(init.format(dt=dt))}\n\n"
            f"    def forward(self, {name}):\n{indent(body)}\n\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(map(str, shape))}{dt})]\n\n\n"
            "def get_init_inputs():\n    return []\n")


def traced(tmp_path, text: str, name: str = "ref"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    ref = Reference(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ref, trace(ref)


def check_token_taken(ref: Reference, graph) -> None:
    """The IR on the selected token, x.select(1, graph.token) as the emitted forward takes it,
    against the module on the whole (batch, tokens, features) input: in fp64 (output and buffers,
    training and eval), x's gradient (the token's, zeros at the others) and the parameters' against
    torch.autograd's, and in bf16 / fp16 (the module converted) against fp64, to twice eager's error
    and a step."""
    for training in ((False,) if graph.dropouts else (True, False)):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).double().train(training)
        twin = copy.deepcopy(model)
        torch.manual_seed(1)
        x = torch.randn(ref.token_of, dtype=torch.float64, requires_grad=True)
        out = model(x)
        rows = x.detach().select(1, graph.token)
        with torch.no_grad():
            got = graph.interpret(rows, twin)
        assert got.shape == out.shape
        torch.testing.assert_close(got, out.detach(), rtol=1e-9, atol=1e-11)
        for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)
        g = torch.randn_like(out)
        names = [n for n, _ in model.named_parameters()]
        expect = torch.autograd.grad(out, [x, *model.parameters()], g, allow_unused=True)
        with torch.no_grad():
            gx, gp = graph_vjp(graph, rows, copy.deepcopy(model), g)
        whole = torch.zeros_like(x)
        whole.select(1, graph.token).copy_(gx.reshape(rows.shape))
        torch.testing.assert_close(whole, expect[0], rtol=1e-7, atol=1e-9)
        for name, e in zip(names, expect[1:]):
            if e is not None:
                torch.testing.assert_close(gp[name].reshape(e.shape), e, rtol=1e-7, atol=1e-9, msg=name)
    for dt in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).to(dt).train(not graph.dropouts)
        twin, exact = copy.deepcopy(model), copy.deepcopy(model).double()
        torch.manual_seed(1)
        x = torch.randn(ref.token_of, dtype=torch.float64).to(dt)
        with torch.no_grad():
            eager, got, want = model(x), graph.interpret(x.select(1, graph.token), twin), exact(x.double())
        assert got.dtype == eager.dtype
        error = lambda t: (t.double() - want).abs().nan_to_num(1e30).max().item()   # noqa: E731
        step = torch.finfo(dt).eps * max(want.abs().max().item(), 1e-3)
        assert error(got) <= 2 * error(eager) + 2 * step, (dt, error(got), error(eager))


# ---- the generated spellings --------------------------------------------------------------------
# Each index with each head; the name, .contiguous() and the dtype rotate over them, so that each
# name, both contiguities and both dtypes meet every index and every head.
CASES = [(index, head, NAMES[(i + j) % len(NAMES)], (i + j) % 2 == 1, dtype)
         for (i, index), (j, head) in itertools.product(enumerate(INDEXES), enumerate(HEADS))
         for dtype in (None, "bfloat16")]


@pytest.mark.parametrize("index, head, name, contiguous, dtype", CASES,
                         ids=[f"{i} {h} {n}{' contiguous' if c else ''} {d or 'float32'}" for i, h, n, c, d in CASES])
def test_a_head_on_one_token_is_taken_and_right(tmp_path, index, head, name, contiguous, dtype):
    ref, graph = traced(tmp_path, head_source(index, head, name, contiguous, dtype))
    position = INDEXES[index][1]
    assert ref.token_of == SHAPE and ref.token_at == position and ref.rows_of is None
    assert tuple(ref.input.shape) == (SHAPE[0], SHAPE[2])   # (the workload: batch B, in_features D)
    assert graph.token % SHAPE[1] == position
    check_token_taken(ref, graph)


@pytest.mark.parametrize("num_labels", [1, 2, 3])
def test_a_classification_heads_few_labels_are_taken(tmp_path, num_labels):
    """RobertaClassificationHead's out_proj of 1 to 3 labels: a last GEMM that narrow is taken."""
    ref, graph = traced(tmp_path, head_source("x[:, 0, :]", "classification head", "features", num_labels=num_labels))
    assert graph.out_features == num_labels and len(graph.parts) == 2
    check_token_taken(ref, graph)


def test_the_workload_is_the_tokens_rows_drawn_from_get_inputs(tmp_path):
    """The reference's inputs are the selected token of get_inputs()' tensor (as drawn, rows of as
    many calls as a batch asks for); the checks' models, called with those rows, get the input
    around them (the token at its place, zeros elsewhere, the reference's number of tokens)."""
    ref, graph = traced(tmp_path, head_source("x[:, -1, :]", "pooler", "x"))
    torch.manual_seed(5)
    drawn = [ref.module.get_inputs()[0] for _ in range(3)]
    torch.manual_seed(5)
    (rows,) = ref.inputs()
    assert rows.is_contiguous() and torch.equal(rows, drawn[0][:, -1])
    torch.manual_seed(5)
    (more,) = ref.inputs(10)   # (3 calls' tokens, 10 of their rows)
    assert torch.equal(more, torch.cat([d[:, -1] for d in drawn])[:10])
    around = ref.tokens_around(rows)
    assert around.shape == SHAPE and torch.equal(around[:, -1], rows) and not around[:, :-1].any()
    assert torch.equal(ref.timed_input(rows), around)   # (what bench times both models on)
    torch.manual_seed(0)
    model = ref.given_extra_inputs(ref.Model)(*ref.init_args())
    x = rows.clone().requires_grad_()
    out = model(x)
    with torch.no_grad():
        torch.testing.assert_close(out, graph.interpret(rows, model))
    out.sum().backward()
    whole = torch.randn(SHAPE)   # (the same token among other tokens, passed as it is)
    whole[:, -1] = rows
    whole.requires_grad_()
    model(whole).sum().backward()
    torch.testing.assert_close(x.grad, whole.grad[:, -1])
    assert not whole.grad[:, :-1].any()


def test_batch_and_features_are_the_tokens(tmp_path):
    """--batch and --in name the token's rows: the batch constant and the features' (the tokens'
    number stays the reference's, where the selected position lies)."""
    path = tmp_path / "ref.py"
    path.write_text(f"{HEADER}\nbatch_size = 4\nseq_len = 7\nhidden = 16\n\n\nclass Model(nn.Module):\n"
                    "    def __init__(self, hidden_size):\n        super().__init__()\n"
                    "        self.dense = nn.Linear(hidden_size, hidden_size)\n\n"
                    "    def forward(self, hidden_states):\n        return torch.tanh(self.dense(hidden_states[:, -1]))\n\n\n"
                    "def get_inputs():\n    return [torch.randn(batch_size, seq_len, hidden)]\n\n\n"
                    "def get_init_inputs():\n    return [hidden]\n")
    ref = Reference(str(path))
    assert ref.constant_for("batch") == ["batch_size"] and ref.constant_for("in_features") == ["hidden"]
    ref = Reference(str(path), overrides={"batch": 9, "in_features": 24})
    assert ref.token_of == (9, 7, 24) and ref.token_at == 6 and tuple(ref.input.shape) == (9, 24)
    graph = trace(ref)
    assert graph.in_features == 24 and graph.token == -1
    check_token_taken(ref, graph)


def test_a_batch_no_constant_sets_is_rows_of_several_draws(tmp_path):
    """--batch where get_inputs() writes the batch as a literal: that many samples' tokens, of
    repeated get_inputs() calls; the module's input and output dtype read on it (a bf16 module's
    output is bf16: Reference.output_dtype runs the module on its (batch, tokens, features) input)."""
    path = tmp_path / "ref.py"
    path.write_text(head_source("x[:, 0]", "classification head", "features", dtype="bfloat16"))
    ref = Reference(str(path), overrides={"batch": 9})
    assert ref.token_of == (9, *SHAPE[1:]) and tuple(ref.input.shape) == (9, SHAPE[2])
    assert ref.output_dtype() == torch.bfloat16
    torch.manual_seed(3)
    drawn = torch.cat([ref.module.get_inputs()[0][:, 0] for _ in range(3)])[:9]
    torch.manual_seed(3)
    assert torch.equal(ref.inputs()[0], drawn)


# ---- what is not one token, refused by name -----------------------------------------------------
L = "self.fc = nn.Linear(16, 16)\nself.register_buffer('idx', torch.tensor(2))"
REFUSED = {
    "a slice of several tokens": ("x = self.fc(x[:, :4])", r"indexing the module's \(4, 7, 16\) input: .*not a slice of several tokens"),
    "a slice, then their mean": ("x = self.fc(x[:, :4].mean(1))", r"indexing the module's \(4, 7, 16\) input"),
    "a position that is a tensor": ("x = self.fc(x[:, self.idx])", r"not a slice of several tokens, a position that is a tensor"),
    "a position read from the input": ("x = self.fc(x[:, x.size(1) - 1])", r"x\.size\(1\) of the module's \(4, 7, 16\) input"),
    "the tokens' number unpacked": ("B, S, D = x.shape\nx = self.fc(x[:, S - 1])", r"x\.size\(1\) of the module's"),
    "the last dimension": ("self.fc = nn.Linear(7, 16)\nx = self.fc(x[:, :, 0])", r"not .* an index of the features"),
    "another read of the input": ("x = self.fc(x[:, 0]) + x.sum()", r"sum of the module's \(4, 7, 16\) input as it is"),
    "two tokens": ("x = self.fc(x[:, 0] + x[:, 1])", r"a selection of token 1 of the module's \(4, 7, 16\) input after one of token 0"),
    "an in-place write": ("x[:, 0] *= 2\nx = self.fc(x[:, 0])", r"of the module's \(4, 7, 16\) input"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_not_one_token_is_refused_saying_why(tmp_path, name):
    body, message = REFUSED[name]
    init = L
    if body.startswith("self.fc ="):
        line, body = body.split("\n", 1)
        init = line
    text = (f"{HEADER}\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"{textwrap.indent(init, ' ' * 8)}\n\n    def forward(self, x):\n{textwrap.indent(body, ' ' * 8)}\n"
            f"        return x\n\n\ndef get_inputs():\n    return [torch.randn({', '.join(map(str, SHAPE))})]\n\n\n"
            "def get_init_inputs():\n    return []\n")
    with pytest.raises(Unsupported, match=message):
        traced(tmp_path, text)


@pytest.mark.parametrize("kept", ["x[:, 0] * 2 into the GEMM", "x[:, 0] again after it"])
def test_the_token_read_as_the_input_is_elsewhere(tmp_path, kept):
    """The selected token is the (batch, features) input: scaled into the GEMM, or read again after
    it (a residual), as any input is."""
    body = "x = self.fc(x[:, 0] * 2)" if "GEMM" in kept.split()[-1] else "x = self.fc(x[:, 0]) + x[:, 0]"
    text = (f"{HEADER}\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.fc = nn.Linear(16, 16)\n\n    def forward(self, x):\n        {body}\n        return x\n\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(map(str, SHAPE))})]\n\n\n"
            "def get_init_inputs():\n    return []\n")
    ref, graph = traced(tmp_path, text)
    check_token_taken(ref, graph)


# ---- the emitted forward -----------------------------------------------------------------------
@pytest.mark.parametrize("index, dtype", [("x[:, -1]", None), ("torch.select(x, 1, 0)", "bfloat16")])
def test_the_emitted_forward_hands_the_kernels_the_tokens_rows(tmp_path, monkeypatch, index, dtype):
    """ModelNew on the (batch, tokens, features) input: the kernels get the selected token's
    contiguous (batch, features) rows (M = batch, K = features), the output has the module's shape;
    a (batch, features) input is refused by name, as the reference fails on it."""
    from kgen.check.loading import EmittedFile

    path = tmp_path / "ref.py"
    path.write_text(head_source(index, "pooler", "hidden_states", dtype=dtype))
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    m = f.module
    library = launch_on_cpu(m, monkeypatch)
    seen = []
    monkeypatch.setattr(m, "_kgen_checked_input", lambda x, weight: seen.append(x) or x)   # (its CUDA check)
    torch.manual_seed(0)
    new, ref = f.module.ModelNew(*f.init_args()), f.reference.Model(*f.init_args())
    x = torch.randn(SHAPE).to(new.dense.weight.dtype)
    with torch.no_grad():
        got, expect = new(x), ref(x)
    assert got.shape == expect.shape
    assert [(c["M"], c["N"], c["K"]) for c in library.calls] == [(SHAPE[0], SHAPE[2], SHAPE[2])]
    (rows,) = seen
    assert rows.is_contiguous() and torch.equal(rows, x[:, INDEXES[index][1]])
    with pytest.raises(ValueError, match=r"ModelNew expects input of shape \(batch, tokens, in_features\)"):
        new(x[:, 0])
    # the checks' ModelNew (Reference.given_extra_inputs), called with the rows: the tokens around them
    seen.clear()
    with torch.no_grad():
        f.ModelNew(*f.init_args())(x[:, INDEXES[index][1]])
    assert torch.equal(seen[0], x[:, INDEXES[index][1]])
