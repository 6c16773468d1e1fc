"""Dropout (CPU tier): the identity in eval mode; in training mode an emitted file draws torch's
own mask (F.dropout of ones, the same RNG stream as the reference's dropout) for a dropout of a
(batch, features) value (tests/test_element_operands.py tests the mask itself), and refuses
training mode for one of another value; a dropout that is active in eval mode too is refused
at generation."""

import ast

import pytest
import torch

from kgen.codegen import generator
from kgen.ir.graph import Unsupported
from kgen.frontend.reference import Reference
from kgen.tune.spec import Spec, Tile
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace

from conftest import REFS_DIR
from test_pool_tail import module


@pytest.mark.parametrize("body, path", [
    ("x = F.dropout(x, 0.3, training=self.training)\nx = torch.relu(x)", ""),
    ("x = nn.functional.dropout(x, p=0.5, training=self.training) * 2.0", ""),
    ("x = torch.dropout(x, 0.25, self.training)", ""),   # (what F.dropout calls)
])
def test_functional_dropout_following_the_modules_mode_is_recorded(body, path, tmp_path):
    graph = trace(module(tmp_path, body))
    (d,) = graph.dropouts
    assert d["path"] == path and d["line"] is not None
    assert not [n for n in graph.nodes if n.op == "dropout"]
    # mul(x, mask): the mask is 1 in eval mode, torch's mask * scale in training mode
    (mask,) = [n for n in graph.nodes if n.kind == "mask"]
    assert d["reproduced"] and mask.attrs["p"] == d["p"]


def test_dropout_active_in_eval_mode_too_is_refused(tmp_path):
    with pytest.raises(Unsupported, match="active in eval mode"):
        trace(module(tmp_path, "x = F.dropout(x, 0.3)\nx = torch.relu(x)"))


def test_inactive_dropouts_are_the_identity(tmp_path):
    for body in ("x = F.dropout(x, 0.0, training=True)", "x = F.dropout(x, 0.4, training=False)"):
        assert trace(module(tmp_path, body)).dropouts == []


def test_the_emitted_forward_draws_the_mask_in_training_mode(tmp_path):
    path = REFS_DIR / "gemm_dropout_scale_softmax.py"
    ref = Reference(path)
    assert trace(ref).dropouts[0]["path"] == "dropout"
    spec = Spec.of(str(path), 64, 128, 256, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    text = generator.render(spec)
    assert check_emitted(text) == []
    forward = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    # No raise but the submodules' check (test_submodule_guard) and the check of the
    # hyperparameters baked in (p among them: the mask is drawn with it)
    raises = [ast.unparse(n) for n in ast.walk(forward) if isinstance(n, ast.Raise)]
    assert len(raises) == 2 and raises[0] == "raise RuntimeError(changed_submodule)", raises
    assert "synthesized for dropout.p=0.2" in raises[1], raises
    draws = [ast.unparse(n) for n in forward.body if isinstance(n, ast.Assign)
             and "dropout(" in ast.unparse(n.value)]
    assert len(draws) == 1 and draws[0].endswith("0.2, True) if self.dropout.training else None")
    assert "dropout:   Dropout(p=0.2)" in text and "draws torch's own mask" in text   # the header
    # The oracle is the module, in eval mode and (seeded alike) in training mode.
    graph = trace(ref)
    model = ref.Model(*ref.init_args())
    x = torch.rand(4, ref.input.shape[1])
    with torch.no_grad():
        for training in (False, True):
            model.train(training)
            torch.manual_seed(7)
            expect = model(x)
            torch.manual_seed(7)
            torch.testing.assert_close(graph.interpret(x, model), expect, rtol=1e-6, atol=1e-7)


def test_dropout_active_only_in_eval_mode_is_refused(tmp_path):
    with pytest.raises(Unsupported, match="active in eval mode"):
        trace(module(tmp_path, "x = F.dropout(x, 0.5, not self.training)"))


def test_functional_dropout_is_guarded_on_every_modules_mode(tmp_path):
    ref = module(tmp_path, "x = F.dropout(x, 0.3, training=self.training)\nx = torch.relu(x)")
    spec = Spec.of(str(ref.path), 64, 128, 256, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    # F.dropout's flag reaches the trace as a bool: which module's mode it follows is unknown;
    # the mask follows the model's, and modules in different modes refuse (never a silently
    # different output).
    lines = generator.forward_lines(generator.lowered_parts(spec))
    check = generator.submodule_lines(generator.lowered_parts(spec)[-1].traced.called_modules)
    assert lines[:len(check)] == check   # (the submodules' check first: test_submodule_guard)
    assert lines[len(check)] == "if any(m.training != self.training for m in self.modules()):"


@pytest.mark.parametrize("body", [
    "x = F.dropout(x, 0.3, training=self.training)\nif self.training:\n    x = x - x.mean(dim=1, keepdim=True)",
    "x = F.dropout(x, 0.3, training=self.training)\nx = x * 2.0 if self.training else x",
])
def test_a_branch_on_the_mode_beside_a_dropout_is_refused(body, tmp_path):
    """The training mode's IR is compared with the eval mode's with its dropouts taken as the
    identity: a dropout's mask no longer hides another op of training mode only (kgen wrote that
    op into the eval mode's forward too)."""
    with pytest.raises(Unsupported, match="other ops in training mode than in eval mode"):
        trace(module(tmp_path, body))


def test_a_dropout_alone_is_the_only_difference_between_the_modes(tmp_path):
    graph = trace(module(tmp_path, "x = F.dropout(x, 0.3, training=self.training)\nx = torch.relu(x) * 2.0"))
    assert len(graph.dropouts) == 1
