"""kgen/check/kinks.py: the probe that finds the reference's output elements at a kink, which the
gradient checks leave out (an fp32 result's sign there is a coin toss, fp64's included). CPU, fp64."""

import pytest
import torch
import torch.nn as nn

from kgen.check.kinks import KINK_MAX_FRACTION, masked_output_gradient, near_kinks

ROWS, IN, OUT = 64, 256, 128


def _linear_then(activation, row, col, at=0.0):
    """fp64 Linear -> activation with the pre-activation of (row, col) put `at` (1e-9 past it)."""
    torch.manual_seed(0)
    linear = nn.Linear(IN, OUT).double()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    with torch.no_grad():
        z = linear(x)
        linear.bias[col] += at + 1e-9 - z[row, col]
    return nn.Sequential(linear, activation), x


@pytest.mark.parametrize("activation, at", [(nn.LeakyReLU(0.1), 0.0), (nn.ReLU(), 0.0), (nn.Hardtanh(), 1.0),
                                            (nn.Hardtanh(), -1.0)])
def test_an_element_at_a_kink_is_marked_and_few_others(activation, at):
    model, x = _linear_then(activation, 5, 17, at)
    kinks = near_kinks(model, x)
    assert kinks.shape == (ROWS, OUT)
    assert kinks[5, 17]
    # The probe's moves are ~2e-3 relative: elements within that of a kink, a small fraction.
    assert int(kinks.sum()) <= 0.01 * kinks.numel()


@pytest.mark.parametrize("activation", [nn.GELU(), nn.Sigmoid(), nn.Tanh(), nn.Identity(), nn.SiLU()])
def test_a_smooth_function_has_no_kinks(activation):
    model, x = _linear_then(activation, 5, 17)
    assert not near_kinks(model, x).any()


def test_the_mark_is_where_the_gradient_jumps():
    """Two points either side of the kink, 1e-7 apart in the input (an fp32 rounding): the
    gradient differs in the marked column only, and with g 0 there not at all."""
    model, x = _linear_then(nn.LeakyReLU(0.1), 5, 17)
    kinks = near_kinks(model, x)
    g = torch.randn(ROWS, OUT, dtype=torch.float64)
    masked, note = masked_output_gradient(g, kinks)
    assert "left out" in note and masked[5, 17] == 0 and int((masked != g).sum()) == int(kinks.sum())

    def bias_gradient(inputs, out_grad):
        model.zero_grad()
        model(inputs).backward(out_grad)
        return model[0].bias.grad.clone()

    x2 = x.clone()
    # z[5, 17] was 1e-9 past 0; its GEMM part moved by 1e-7 of itself toward 0 crosses it.
    with torch.no_grad():
        part = float(model[0](x)[5, 17] - model[0].bias[17])
    x2[5] *= 1 - 1e-7 * (1 if part > 0 else -1)
    assert (model(x2)[5, 17] < 0) != (model(x)[5, 17] < 0)
    jump = (bias_gradient(x, g) - bias_gradient(x2, g)).abs()
    assert jump[17] > 0.1 * g[5, 17].abs() and jump.max() == jump[17]
    assert (bias_gradient(x, masked) - bias_gradient(x2, masked)).abs().max() < 1e-9


def test_buffers_and_rng_are_as_before():
    """BatchNorm in training mode: the probe's three forwards leave its running statistics as
    they were; before_forward runs before each."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, OUT), nn.BatchNorm1d(OUT), nn.ReLU()).double().train()
    x = torch.rand(ROWS, IN, dtype=torch.float64)
    before = {k: v.clone() for k, v in model.named_buffers()}
    calls = []
    near_kinks(model, x, lambda: calls.append(1))
    assert len(calls) == 3
    assert all(torch.equal(before[k], v) for k, v in model.named_buffers())


def test_too_many_kinks_leave_nothing_out():
    g = torch.ones(10, 10)
    kinks = torch.zeros(10, 10, dtype=torch.bool)
    kinks[0, : int(KINK_MAX_FRACTION * 100) + 1] = True
    same, note = masked_output_gradient(g, kinks)
    assert same is g and "none left out" in note
    assert masked_output_gradient(g, torch.zeros_like(kinks)) == (g, "")
