"""kgen/check/kinks.py: the probe that finds the reference's output elements at a kink, and the
output gradient that leaves them out where that is shown to take the jump out of the fp64
gradients (an fp32 result's sign at a kink is a coin toss, eager's included). CPU, fp64."""

import pytest
import torch
import torch.nn as nn

from kgen.check.kinks import kink_free_gradient, near_kinks, output_shape

ROWS, IN, OUT = 64, 256, 128
TOL = 1e-4


def _linear_then(tail, row=5, col=17, at=0.0, out=OUT):
    """fp64 Linear -> tail, the Linear's output at (row, col) put 1e-9 past `at`."""
    torch.manual_seed(0)
    linear = nn.Linear(IN, out).double()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    with torch.no_grad():
        z = linear(x)
        linear.bias[col] += at + 1e-9 - z[row, col]
    return nn.Sequential(linear, *tail).double(), x


def _flipped(model, x, row=5, col=17):
    """x with row `row` moved by 1e-7 of itself so that the Linear's output at (row, col), 1e-9
    past a kink, lands on the other side (an fp32 rounding of the input's size)."""
    with torch.no_grad():
        part = float(model[0](x)[row, col] - model[0].bias[col])
    x2 = x.clone()
    x2[row] *= 1 - 1e-7 * (1 if part > 0 else -1)
    return x2


def _bias_gradient(model, inputs, out_grad):
    model.zero_grad()
    model(inputs).backward(out_grad)
    return model[0].bias.grad.clone()


@pytest.mark.parametrize("activation, at", [(nn.LeakyReLU(0.1), 0.0), (nn.ReLU(), 0.0), (nn.Hardtanh(), 1.0),
                                            (nn.Hardtanh(), -1.0)])
def test_an_element_at_a_kink_is_marked_and_few_others(activation, at):
    model, x = _linear_then([activation], at=at)
    kinks = near_kinks(model, x)
    assert kinks.shape == (ROWS, OUT) and kinks[5, 17]
    # The probe's moves are ~2e-3 relative: elements within that of a kink, a small fraction.
    assert int(kinks.sum()) <= 0.01 * kinks.numel()


@pytest.mark.parametrize("activation", [nn.GELU(), nn.Sigmoid(), nn.Tanh(), nn.Identity(), nn.SiLU()])
def test_a_smooth_function_has_no_kinks(activation):
    model, x = _linear_then([activation])
    assert not near_kinks(model, x).any()
    g = torch.randn(ROWS, OUT, dtype=torch.float64)
    assert kink_free_gradient(model, x, g, TOL) == (g, "")


# A row op mixes a kink into its whole row: the rows with a marked element are left out, within
# KINK_MAX_ROWS of the batch where rows are narrow (32 features here; at thousands every row has
# one and the check is judged as it is).
NARROW = 32


@pytest.mark.parametrize("tail, how, out", [
    ([nn.LeakyReLU(0.1)], "element(s)", OUT),
    ([nn.ReLU(), nn.Hardtanh(-0.5, 0.5)], "element(s)", OUT),
    ([nn.LeakyReLU(0.1), nn.Softmax(dim=1)], "row(s)", NARROW),
    ([nn.LeakyReLU(0.1), nn.LayerNorm(NARROW)], "row(s)", NARROW),
    # GroupNorm of 4-channel groups dilutes a kink's second difference at the output: a crossing
    # left unmarked in another row may keep a jump (~6e-5 of the largest gradient with this
    # seed): then nothing is left out (the check is judged as it was).
    ([nn.LeakyReLU(0.1), nn.GroupNorm(8, NARROW)], "row(s) or none", NARROW),
])
def test_the_gradient_left_is_the_same_on_both_sides_of_the_kink(tail, how, out):
    """A flip of the kinked element (an fp32 rounding of the input's size) moves the fp64
    gradient by the kink's jump with g as drawn, and not at all with the g the checks use:
    the marked elements alone where the tail is element-wise, their rows where it mixes them."""
    model, x = _linear_then(tail, out=out)
    g = torch.randn(ROWS, out, dtype=torch.float64)
    left, note = kink_free_gradient(model, x, g, TOL)
    if how == "row(s) or none" and "judged as they are" in note:
        assert left is g
        return
    how = how.split(" or ")[0]
    assert f"output {how} at a kink of the reference left out" in note
    assert left[5, 17] == 0 and int((left == 0).sum()) <= 0.1 * left.numel()
    if how == "row(s)":
        assert bool((left[5] == 0).all())
    x2 = _flipped(model, x)
    jump = (_bias_gradient(model, x, g) - _bias_gradient(model, x2, g)).abs().max()
    assert jump > 1e-3
    scale = _bias_gradient(model, x, left).abs().max()
    assert (_bias_gradient(model, x, left) - _bias_gradient(model, x2, left)).abs().max() < 1e-6 * scale


class _MaxOfAll(nn.Module):
    def forward(self, x):
        return x.max()


def test_a_0d_output_at_a_kink_is_its_own_row():
    """x.max() of everything (a 0-d output, Graph.output_tail), its top two elements 1e-9 apart:
    the output is at a kink, and the mask of it (the one element, which is also its row) is
    tried like any other, without indexing a batch dimension it has not got."""
    model, x = _linear_then([_MaxOfAll()])
    with torch.no_grad():
        z = model[0](x)
        top = int(z.argmax())
        second = int(z.flatten().topk(2).indices[1])
        model[0].bias[second % OUT] += z.flatten()[top] - z.flatten()[second] - 1e-9
    kinks = near_kinks(model, x)
    assert kinks.shape == () and bool(kinks)
    g = torch.tensor(1.0, dtype=torch.float64)
    left, note = kink_free_gradient(model, x, g, TOL)
    assert note and (left is g or float(left) == 0.0)


def test_a_kink_no_mask_can_reach_is_judged_as_it_is():
    """A ReLU between two Linears: its kinks mix into every output of their row, and the rows
    marked are most of the batch; g comes back as drawn, and the note says why."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, 512), nn.ReLU(), nn.Linear(512, 32)).double()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    g = torch.randn(ROWS, 32, dtype=torch.float64)
    same, note = kink_free_gradient(model, x, g, TOL)
    assert same is g and "judged as they are" in note


def test_buffers_are_kept_and_before_forward_runs_before_each_forward():
    """BatchNorm in training mode: the probe's forwards (and the gradients' that check a mask)
    leave its running statistics as they were; before_forward runs right before each forward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, OUT), nn.BatchNorm1d(OUT), nn.ReLU()).double().train()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    before = {k: v.clone() for k, v in model.named_buffers()}
    events = []
    model.register_forward_pre_hook(lambda m, args: events.append("forward"))
    reset = lambda: events.append("reset")   # noqa: E731
    assert output_shape(model, x, reset) == (ROWS, OUT)
    near_kinks(model, x, reset)
    kink_free_gradient(model, x, torch.randn(ROWS, OUT, dtype=torch.float64), TOL, reset)
    assert all(torch.equal(before[k], v) for k, v in model.named_buffers())
    assert events[:2] == ["reset", "forward"] and len(events) >= 8
    assert all(a == "reset" and b == "forward" for a, b in zip(events[::2], events[1::2]))


@pytest.mark.parametrize("activation, at", [(nn.Hardshrink(0.1), 0.1), (nn.Hardshrink(0.1), -0.1),
                                            (nn.Threshold(-0.5, 0.1), -0.5)])
def test_an_element_at_a_jump_is_marked_for_the_forward_checks(activation, at):
    """A jump (hardshrink, threshold) is found as a kink is: its second difference is as large as
    its first. An element 1e-9 past it flips to the other side under an fp32 rounding of the
    input, and moves by the whole jump; jump_mask leaves it out, and few others."""
    from kgen.check.kinks import jump_mask

    model, x = _linear_then([activation], at=at)
    with torch.no_grad():
        moved = (model(_flipped(model, x)) - model(x)).abs()
    assert moved[5, 17] > 0.09   # the whole jump
    mask = jump_mask(model, x)
    assert mask is not None and mask[5, 17] and int(mask.sum()) <= 0.01 * mask.numel()


class _Staircase(nn.Module):
    """round(x, decimals=1) * 0.001 + tanh(x): a step every 0.1 (plus a smooth part)."""

    def forward(self, z):
        return torch.round(z * 4.0, decimals=1) * 1e-3 + torch.tanh(z)


def test_a_dense_staircase_keeps_its_jump_mask():
    """Small steps (1e-4, every 0.025 of the Linear's output) beside a smooth part: over
    KINK_PROBE's moves the smooth part's first differences (~1e-3) dwarf a step, whose second
    difference is then no kink, and the element 1e-9 past a step goes unmarked; the forward checks'
    finer probe (JUMP_PROBE) marks it, and few others."""
    from kgen.check.kinks import KINK_MAX_FRACTION, jump_mask, near_kinks

    model, x = _linear_then([_Staircase()], at=0.0125)   # (z * 4 = 0.05: a step of round(., 1))
    with torch.no_grad():
        moved = (model(_flipped(model, x)) - model(x)).abs()
    assert moved[5, 17] > 0.5e-4   # the whole step (1e-4)
    mask = jump_mask(model, x)
    assert mask is not None and mask[5, 17] and int(mask.sum()) <= KINK_MAX_FRACTION * mask.numel()
    assert not near_kinks(model, x)[5, 17]


class _FloorThenSoftmax(nn.Module):
    """z + floor(z / -3) then a softmax over the row (docs/experiments/s19/refs/div_floor_mode.py)."""

    def forward(self, z):
        return torch.softmax(z + torch.div(z, -3.0, rounding_mode="floor"), dim=-1)


def test_a_jump_before_a_row_op_leaves_its_rows_out():
    """A softmax carries one element's jump into its whole row, so every element of a row with a
    crossing is marked: at 1024 features a few rows in a hundred hold one, more than
    KINK_MAX_FRACTION of the elements (session 20's H100 run: the mask gave up, and one flip at
    2051 rows failed `kgen validate`'s check at 5.6e4x eager's error). The rows are left out whole,
    the element 1e-9 past a step among them, and most rows stay judged."""
    from kgen.check.kinks import KINK_MAX_FRACTION, KINK_MAX_ROWS, jump_mask, near_kinks

    model, x = _linear_then([_FloorThenSoftmax()], at=-3.0, out=1024)
    with torch.no_grad():
        moved = (model(_flipped(model, x)) - model(x)).abs()
    assert moved[5, 17] > 1e-4   # the whole step, through the softmax
    marked = near_kinks(model, x, probe=2.0 ** -14)
    assert int(marked.sum()) > KINK_MAX_FRACTION * marked.numel()   # too many for elements alone
    mask = jump_mask(model, x)
    assert mask is not None and mask[5, 17]
    rows = mask.any(dim=1)
    assert bool((mask == rows[:, None]).all())   # whole rows
    assert 0 < int(rows.sum()) <= KINK_MAX_ROWS * ROWS


def test_a_frozen_parameter_gets_zeros_and_the_probe_runs():
    """A parameter with requires_grad False (a frozen layer): autograd.grad refuses it, so the
    gradients give it zeros, the others theirs, and the kink search still runs."""
    from kgen.check.kinks import gradients

    model, x = _linear_then([nn.LeakyReLU(0.1)])
    model[0].bias.requires_grad_(False)
    g = torch.randn(ROWS, OUT, dtype=torch.float64)
    dx, dw, db = gradients(model, x, g)
    assert torch.equal(db, torch.zeros_like(db)) and dw.abs().max() > 0 and dx.abs().max() > 0
    masked, note = kink_free_gradient(model, x, g, TOL)
    assert "left out" in note and (masked == 0).sum() >= 1


def test_an_element_that_barely_moves_along_the_probe_is_found_along_a_second():
    """An element at a kink whose value barely moves along the probe's direction (under
    KINK_FLOOR of the mean move: no kink to near_kinks) still flips its gradient within the
    verification's move; every mask then failed and the gradient was judged with the kink in
    (session 54: the training check of Linear, x2, LeakyReLU at 2048 x 1024 -> 32, one step in
    20). A second direction finds it, and the element alone is left out."""
    from kgen.check.kinks import KINK_SEED, KINK_VERIFY, _probe_direction

    torch.manual_seed(0)
    linear = nn.Linear(IN, OUT).double()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    model = nn.Sequential(linear, nn.LeakyReLU(0.1)).double()
    r = _probe_direction(x, KINK_SEED)
    with torch.no_grad():
        moves = (x * r) @ linear.weight.t()            # each element's move along r, per unit
        row = int(near_kinks(model, x).sum(dim=1).argmin())   # a row with nothing else marked
        col = 17
        q = x[row] * r[row]
        # w[col] changed so that its element moves 0.5 % of the mean move along r, then the bias
        # puts it a tenth of the verification's move from LeakyReLU's kink
        target = 0.005 * float(moves.abs().mean())
        linear.weight[col] += (target - float(q @ linear.weight[col])) * q / float(q @ q)
        z = float(x[row] @ linear.weight[col] + linear.bias[col])
        linear.bias[col] += 0.1 * KINK_VERIFY * target - z
    assert not near_kinks(model, x)[row].any()         # along the first direction: not a kink
    g = torch.randn(ROWS, OUT, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    left, note = kink_free_gradient(model, x, g, TOL)
    assert left[row, col] == 0 and "element(s)" in note, note
    assert int((left == 0).sum()) <= 0.01 * left.numel()
