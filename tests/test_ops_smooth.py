"""ops.SMOOTH and graph.smooth against the torch oracles: every op the gate counts as smooth
(its gradient checks then skip the look for kinks, check/validate.may_kink) has a derivative
without a jump over a grid that holds the bends of the ops that have them; the ops that bend are
found bending by the same probe. CPU, fp64."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kgen.ir import graph, ops

# The bends of kgen's point-wise ops (relu and abs at 0, hardtanh at +-1, hardswish and
# hardsigmoid at +-3, softplus's threshold at 20, clamp's and minimum's at the values below), on
# a grid of 0.01 steps in between.
BENDS = [0.0, 1.0, -1.0, 3.0, -3.0, 20.0, 15.0, 0.5, -0.25, 2.0, -2.0]
POINTS = sorted(set(BENDS) | {round(-4 + 0.01 * i, 2) for i in range(801)})
STEP = 1e-6
ATTRS = {"clamp": {"min": -1.0, "max": 2.0}, "minimum_const": {"other": 0.5}, "maximum_const": {"other": -0.25},
         "leaky_relu": {"negative_slope": 0.2}}
OTHER = 0.7   # a binary op's other operand


def derivative_jumps(name: str, attrs: dict | None = None) -> list[tuple[int, float]]:
    """(operand, point) where op `name`'s derivative in that operand differs between point - STEP
    and point + STEP by more than a smooth function's would (1e-2 of its size, 1e-4 at least: the
    bends are 0.17 and more; a smooth derivative moves by its own derivative times 2 STEP)."""
    op = ops.POINTWISE[name]
    jumps = []
    for i in range(op.arity):
        for at in POINTS:
            grads = []
            for side in (-STEP, STEP):
                x = torch.tensor(at + side, dtype=torch.float64, requires_grad=True)
                operands = [x if j == i else torch.tensor(OTHER, dtype=torch.float64) for j in range(op.arity)]
                y = ops.torch_apply(name, operands, attrs if attrs is not None else ATTRS.get(name))
                if not (y.requires_grad and torch.isfinite(y)):
                    break
                (g,) = torch.autograd.grad(y, [x])
                grads.append(float(g))
            if len(grads) < 2 or not all(abs(g) < 1e6 for g in grads):   # outside the domain, or at a pole
                continue
            if abs(grads[1] - grads[0]) > max(1e-2 * max(abs(grads[0]), abs(grads[1])), 1e-4):
                jumps.append((i, at))
    return jumps


@pytest.mark.parametrize("name", sorted(ops.SMOOTH))
def test_a_smooth_op_has_no_bend(name):
    assert derivative_jumps(name) == []


@pytest.mark.parametrize("threshold, smooth", [(20.0, True), (15.0, True), (1.0, False), (-2.0, False)])
def test_softplus_is_smooth_by_its_threshold(threshold, smooth):
    """softplus is x itself where beta x passes its threshold: a bend of 1 - sigmoid(threshold)."""
    assert ops.smooth("softplus", {"threshold": threshold}) is smooth
    assert (derivative_jumps("softplus", {"beta": 1.0, "threshold": threshold}) == []) is smooth
    node = graph.Node(0, "pointwise", "tile", op="softplus", attrs={"beta": 1.0, "threshold": threshold})
    assert graph.smooth(node) is smooth


@pytest.mark.parametrize("name", ["relu", "abs", "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "clamp",
                                  "minimum_const", "maximum_const", "minimum", "maximum", "selu"])
def test_an_op_that_bends_is_found_bending_and_is_not_smooth(name):
    assert derivative_jumps(name), f"the probe finds no bend of {name}: it could not tell one"
    assert name not in ops.SMOOTH


def test_the_nodes_that_bend():
    node = lambda kind, op="": graph.Node(0, kind, "tile", op=op)   # noqa: E731
    assert all(graph.smooth(node(k)) for k in ("gemm", "batchnorm", "groupnorm", "param", "const", "mask", "input"))
    assert graph.smooth(node("reduce", "sum")) and graph.smooth(node("pool", "avg"))
    assert not graph.smooth(node("reduce", "max")) and not graph.smooth(node("pool", "max"))
    assert not graph.smooth(node("pointwise", "relu")) and graph.smooth(node("pointwise", "gelu"))
    assert not graph.smooth(node("a kind graph.py does not know"))


REFS = Path(__file__).parent / "refs"


@pytest.mark.parametrize("ref, kinked", [
    ("kgen:gemm_scale_bn", False),                              # GEMM, a scale, BatchNorm
    (REFS / "gemm_bn_bias_div_swish.py", False),               # swish, a division
    (REFS / "gemm_layernorm_gelu.py", False),
    (REFS / "gemm_mul_leakyrelu.py", True),
    (REFS / "gemm_groupnorm_hardtanh.py", True),
    (REFS / "gemm_maxpool_sum_scale.py", True),
    (REFS / "matmul_gelu_softmax.py", True),                   # softmax's row max (graph.SMOOTH_KINDS)
])
def test_which_references_the_gradient_checks_look_for_kinks_in(ref, kinked):
    from kgen.check.validate import may_kink
    from kgen.frontend.reference import Reference

    f = SimpleNamespace(reference=Reference(ref))
    assert may_kink(f) is kinked


def test_a_reference_without_an_ir_may_kink():
    from kgen.check.validate import may_kink

    assert may_kink(SimpleNamespace(_reference_nodes=[]))
