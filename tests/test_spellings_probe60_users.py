"""Session 60's probe (call A) of modules as ML engineers write them (CPU), generated over axes.

PLACEHOLDER
"""

import copy
import textwrap
import warnings

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import rows_at, rows_output, trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
R3 = (4, 5, 16)


def source(init: str, body: str, shape=(8, 16), sig="in_features, out_features", args="16, 16", prelude="",
           dtype=None) -> str:
    """A reference file: Model.__init__'s lines `init`, forward's lines `body` (x in, x out)."""
    dt = f", dtype=torch.{dtype}" if dtype else ""
    indent = lambda text: textwrap.indent(textwrap.dedent(text).strip("\n"), " " * 8)   # noqa: E731
    return (f"{HEADER}{prelude}\n\nclass Model(nn.Module):\n    def __init__(self, {sig}):\n        super().__init__()\n"
            f"{indent(init)}\n\n    def forward(self, x):\n{indent(body)}\n        return x\n\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(map(str, shape))}{dt})]\n\n\n"
            f"def get_init_inputs():\n    return [{args}]\n")


def reference(tmp_path, text: str, name: str = "ref") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return Reference(path)


def _input(ref: Reference, dtype: torch.dtype) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(*(ref.rows_of or tuple(ref.input.shape)), dtype=torch.float64).to(dtype)


def _ir(graph, ref: Reference, x: torch.Tensor, model) -> torch.Tensor:
    """The IR run on x as kgen runs it: on its rows where the input is (..., K), reshaped back."""
    if ref.rows_of is None:
        return graph.interpret(x, model)
    dims = ref.feature_dims
    lead = tuple(x.shape[:x.dim() - dims])
    return rows_output(graph.interpret(x.reshape(-1, x.shape[-dims:].numel()), model), lead, rows_at(graph))


def check_taken(ref: Reference, graph, grads: bool = True) -> None:
    """The IR against the module: in fp64 (output and buffers, training and eval), its gradients
    against torch.autograd's, and in bf16 / fp16 (the module converted, as model.to(dtype)) against
    fp64, to twice eager's error and a step."""
    for training in ((False,) if graph.dropouts else (True, False)):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).double().train(training)
        twin = copy.deepcopy(model)
        x = _input(ref, torch.float64)
        with torch.no_grad():
            expect, got = model(x), _ir(graph, ref, x, twin)
        assert got.shape == expect.shape
        torch.testing.assert_close(got, expect.to(got.dtype), rtol=1e-9, atol=1e-11, equal_nan=True)
        for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)
        if grads:
            x.requires_grad_()
            y = ref.Model(*ref.init_args()).double().train(training)
            y.load_state_dict(model.state_dict())
            torch.manual_seed(0)
            model = ref.Model(*ref.init_args()).double().train(training)
            twin = copy.deepcopy(model)
            out = model(x)
            g = torch.randn_like(out)
            names = [n for n, _ in model.named_parameters()]
            expect = torch.autograd.grad(out, [x, *model.parameters()], g, allow_unused=True)
            rows = x.detach() if ref.rows_of is None else x.detach().reshape(-1, x.shape[-1])
            with torch.no_grad():
                gx, gp = graph_vjp(graph, rows, twin, g.reshape(-1, *g.shape[x.dim() - 1:]) if ref.rows_of and g.dim() else g)
            torch.testing.assert_close(gx.reshape(x.shape), expect[0], rtol=1e-7, atol=1e-9)
            for name, e in zip(names, expect[1:]):
                if e is not None:
                    torch.testing.assert_close(gp[name].reshape(e.shape), e, rtol=1e-7, atol=1e-9, msg=name)
    for dt in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).to(dt)
        twin, exact = copy.deepcopy(model), copy.deepcopy(model).double()
        x = _input(ref, dt)
        with torch.no_grad():
            eager, got, want = model(x), _ir(graph, ref, x, twin), exact(x.double())
        assert got.dtype == eager.dtype
        error = lambda t: (t.double() - want).abs().nan_to_num(1e30).max().item()   # noqa: E731
        step = torch.finfo(dt).eps * max(want.abs().max().item(), 1e-3)
        assert error(got) <= 2 * error(eager) + 2 * step, (dt, error(got), error(eager))


# ---- the fixes, each on its own ----------------------------------------------------------------
@pytest.mark.parametrize("body", ["B, S, D = x.shape\nx = self.fc(x.view(B * S, D)).view(B, S, -1)",
                                  "x = self.fc(x)\nb, s, _ = x.shape\nx = x.reshape(b, s, 4, -1).softmax(-1).reshape(b, s, -1)"])
def test_reading_a_3d_inputs_sizes_is_refused_saying_kgen_traced_its_rows(body, tmp_path):
    """kgen traces a (..., K) input's module on its rows, a 2-d tensor the user never wrote: the
    refusal said "not enough values to unpack (expected 3, got 2)" or "the size index 2 of a 2-d
    shape" of a 3-d tensor, and nothing of the rows."""
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)", body, R3))
    with pytest.raises(Unsupported, match=r"kgen traces the forward on its rows, x\.reshape\(-1, 16\), a 2-d tensor"):
        trace(ref)


# A parameter of more dimensions than the rows, (1, 1, N) (LayerScale's gamma, a bias kept so),
# on a (batch, tokens, K) input: torch gives (batch, tokens, N); on the rows (R, K) it gives
# (1, R, N). kgen's reshape back took the rows as dimension 0 and failed, refused as "this module
# fails one of the two ways (RuntimeError: shape '[2, 3, 6, 16]' is invalid ...)", kgen's own
# reshape and not the module failing.
WIDE = {
    "layerscale": ("self.fc = nn.Linear(in_features, in_features)\n"
                   "self.gamma = nn.Parameter(0.1 * torch.ones(1, 1, in_features))", "x = x + self.gamma * self.fc(x)", R3),
    "bias_11n": ("self.fc = nn.Linear(in_features, out_features, bias=False)\n"
                 "self.b = nn.Parameter(torch.randn(1, 1, out_features))", "x = F.gelu(self.fc(x) + self.b)", R3),
    "four_d_input": ("self.fc = nn.Linear(in_features, out_features)\n"
                     "self.b = nn.Parameter(torch.randn(1, 1, out_features))", "x = self.fc(x) - self.b", (2, 3, 4, 16)),
    "five_d_parameter": ("self.fc = nn.Linear(in_features, out_features)\n"
                         "self.b = nn.Parameter(torch.randn(1, 1, 1, 1, out_features))", "x = self.fc(x) * self.b", R3),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_a_parameter_of_more_dimensions_on_a_3d_input_is_taken(name, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from conftest import launch_on_cpu
    from kgen.check.loading import EmittedFile
    from kgen.cli import main
    from kgen.frontend.trace import rows_at

    init, body, shape = WIDE[name]
    ref = reference(tmp_path, source(init, body, shape))
    graph = trace(ref)
    check_taken(ref, graph)
    # The emitted forward reshapes the kernels' output as rows_output does (shapes: a stand-in library).
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    launch_on_cpu(f.module, monkeypatch)
    monkeypatch.setattr(f.module, "_kgen_checked_input", lambda x, weight: x)
    new, eager = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    x = torch.randn(*shape)
    with torch.no_grad():
        assert new(x).shape == eager(x).shape
    assert rows_at(graph) == (3 if name == "five_d_parameter" else 1)


@pytest.mark.parametrize("shape", [(8, 16), R3])
def test_a_row_op_of_a_value_a_wider_parameter_broadcast_says_so(shape, tmp_path):
    """(a (1, M, N) value with no input in it was refused as "a value that reads the module's input")"""
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)\n"
                                     "self.b = nn.Parameter(torch.randn(1, 1, out_features))",
                                     "x = (self.fc(x) * self.b).sum(-1)", shape))
    with pytest.raises(Unsupported, match=r"sum of a value of shape \(1, M, 16\), which a parameter of more "
                                          r"dimensions .* give the parameter the shape \(N,\) or \(1, N\)"):
        trace(ref)
