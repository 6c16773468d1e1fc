"""Dropout (CPU tier): the identity in eval mode; kgen does not reproduce torch's random mask,
so an emitted file refuses training mode with a message naming the Dropout, and a dropout that
is active in eval mode too is refused at generation."""

import ast

import pytest
import torch

from kgen import generator
from kgen.ir import Unsupported
from kgen.reference import Reference
from kgen.spec import Spec, Tile
from kgen.static_checks import check_emitted
from kgen.trace import trace

from conftest import REFS_DIR
from test_pool_tail import module


@pytest.mark.parametrize("body, path", [
    ("x = F.dropout(x, 0.3, training=self.training)\nx = torch.relu(x)", ""),
    ("x = nn.functional.dropout(x, p=0.5, training=self.training) * 2.0", ""),
])
def test_functional_dropout_following_the_modules_mode_is_recorded(body, path, tmp_path):
    graph = trace(module(tmp_path, body))
    (d,) = graph.dropouts
    assert d["path"] == path and d["line"] is not None
    assert not [n for n in graph.nodes if n.op == "dropout"]   # the identity in the IR


def test_dropout_active_in_eval_mode_too_is_refused(tmp_path):
    with pytest.raises(Unsupported, match="active in eval mode"):
        trace(module(tmp_path, "x = F.dropout(x, 0.3)\nx = torch.relu(x)"))


def test_inactive_dropouts_are_the_identity(tmp_path):
    for body in ("x = F.dropout(x, 0.0, training=True)", "x = F.dropout(x, 0.4, training=False)"):
        assert trace(module(tmp_path, body)).dropouts == []


def test_the_emitted_forward_refuses_training_mode_first(tmp_path):
    path = REFS_DIR / "gemm_dropout_scale_softmax.py"
    ref = Reference(path)
    assert trace(ref).dropouts[0]["path"] == "dropout"
    spec = Spec(str(path), 64, 128, 256, math="tf32x3", backend="wgmma", fusion=1,
                tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    assert check_emitted(text) == []
    forward = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    first = forward.body[0]
    assert isinstance(first, ast.If) and ast.unparse(first.test) == "self.dropout.training"
    assert "Dropout(p=0.2)" in ast.unparse(first.body[0]) and "eval" in ast.unparse(first.body[0])
    assert "dropout:   Dropout(p=0.2)" in text   # the header says it
    # The oracle is the module in eval mode.
    graph = trace(ref)
    model = ref.Model(*ref.init_args()).eval()
    x = torch.rand(4, ref.input.shape[1])
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x, model), model(x), rtol=1e-6, atol=1e-7)


def test_dropout_active_only_in_eval_mode_is_refused(tmp_path):
    with pytest.raises(Unsupported, match="active in eval mode"):
        trace(module(tmp_path, "x = F.dropout(x, 0.5, not self.training)"))


def test_functional_dropout_is_guarded_on_every_modules_mode(tmp_path):
    ref = module(tmp_path, "x = F.dropout(x, 0.3, training=self.training)\nx = torch.relu(x)")
    spec = Spec(str(ref.path), 64, 128, 256, math="tf32x3", backend="wgmma", fusion=1,
                tile=Tile(128, 128, 32, 16, 128, stages=4))
    # F.dropout's flag reaches the trace as a bool: which module's mode it follows is unknown,
    # so any module training refuses (never a silently different output).
    assert generator.forward_lines(generator.lowered_parts(spec))[0] == "if any(m.training for m in self.modules()):"
