"""Which output elements of the reference sit at a kink of its function (ReLU, LeakyReLU, Hardtanh,
clamp, min/max at 0 or at their bounds), so that the gradient checks can leave them out.

At a kink the derivative jumps. Where the exact pre-activation is nearer the kink than a GEMM's
rounding error, the sign an fp32 implementation computes there is a coin toss, and the gradient
it returns for that element differs from fp64's by the whole jump (measured on an H100: a 3xTF32
file of Linear -> x2 -> LeakyReLU(0.1) at 128 x 4096 -> 4096, one element of z 1e-6 from 0 came out
on the other side; dL/dW and dL/db were 0.205 from fp64 in that column, 2e4 times eager fp32's
error, which happened to round to the side fp64 is on). Eager is no better at this, only luckier
on a given draw: at 4096 rows both flipped and both were 1.75 from fp64. Judging a kernel by that
luck rejects correct files (every candidate of a search at a split-K batch, session 6).

The probe needs nothing but the fp64 reference: its output at x, at x (1 + s r) and at
x (1 - s r), r standard normal per element, s = KINK_PROBE. Where the function is smooth the
second difference y+ + y- - 2 y is second order in s, a tiny fraction of the first differences;
where a kink lies between x (1 - s r) and x (1 + s r) it is first order, a large fraction of them.
The probe's moves are ~KINK_PROBE relative, some 100 times the rounding error of an fp32 GEMM over
thousands of terms (u sqrt(K)): every element an fp32 result can flip is inside the probed range,
and the elements marked are a small fraction of the output (~1e-3 for one kink per element).

The gradient checks then weight those elements' output gradient by 0 (kink_free_gradient), but
only where that is shown to work: the fp64 gradients with the masked output gradient, at the
same three points, must have no jump left (a second difference under KINK_SMOOTH x tol of the
gradient's largest value). A kink followed by an element-wise tail passes with the elements
alone; one followed by a row op (softmax, LayerNorm, GroupNorm mix the row) needs the whole row
of each marked element; a kink inside an earlier GEMM part, or one that a BatchNorm in training
mode mixes over the batch, leaves no mask that works within KINK_MAX_FRACTION: then nothing is
left out and the check says so (it is judged as before, flips and all).

The probe's moves are sized for fp32-exact GEMMs (fp32 FFMA, 3xTF32). A TF32 or BF16 GEMM's
rounding is larger than them on many elements; there the checks' yardstick, eager in the same
math (validate.eager_matmul_math), flips as often as the file does.
"""

from __future__ import annotations

from typing import Callable

import torch

# Relative size of the probe's input moves (see the module docstring).
KINK_PROBE = 2.0 ** -9
# An element is at a kink when its second difference is this fraction of its first differences
# (a LeakyReLU(0.1) kink between the probes gives 0.4-0.8, a smooth function ~KINK_PROBE).
KINK_RATIO = 0.2
# ... or of this fraction of the mean first difference over the output, whichever is larger: an
# element whose own derivative is ~0 (GELU at its minimum) has first differences ~0 and a second
# difference that is still second order; it is not a kink.
KINK_FLOOR = 0.05
# At most this fraction of the output's elements is left out one by one, or of its rows whole;
# beyond, the probe gives up (nothing left out).
KINK_MAX_FRACTION = 0.01
KINK_MAX_ROWS = 0.1
# A mask works where the fp64 gradients' second difference over the probe is at most this
# fraction of tol times their largest value (smooth functions: ~KINK_PROBE^2, far below).
KINK_SMOOTH = 0.1
# ... checked over moves a quarter of the probe's: a crossing near the end of the probe's range
# has a second difference too small to mark, and still flips the gradient there; within a
# quarter of it every crossing is marked (ratio >= 0.4 for LeakyReLU(0.1)), and a quarter is
# still ~25x an fp32 GEMM's rounding.
KINK_VERIFY = KINK_PROBE / 4
KINK_SEED = 11
# The forward checks' jump mask (jump_mask) probes finer: an output element differs from fp64's by
# a whole step only where the exact value lies within an fp32 GEMM's rounding of the step, and
# over KINK_PROBE's moves a small step beside a smooth part (1e-3 round(x, 1) + tanh(x)) has a
# second difference far below the smooth part's first differences: no kink, the element left in
# (measured on an H100: one such element, 117x eager's error, in KernelBench's replay of
# docs/experiments/s16/refs/mod_round.py). 2^-14 is still some 4x that rounding at K = 8192.
JUMP_PROBE = 2.0 ** -14


def _probe_direction(x: torch.Tensor, seed: int) -> torch.Tensor:
    return torch.randn(x.shape, generator=torch.Generator(device=x.device).manual_seed(seed), device=x.device,
                       dtype=x.dtype)


class _BuffersKept:
    """Restores the model's buffers on exit (a BatchNorm in training mode updates its running
    statistics on every forward; the probe's must leave no trace)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def __enter__(self):
        self.saved = {name: b.clone() for name, b in self.model.named_buffers()}

    def __exit__(self, *exc):
        with torch.no_grad():
            for name, b in self.model.named_buffers():
                b.copy_(self.saved[name])


@torch.no_grad()
def output_shape(model: torch.nn.Module, x: torch.Tensor, before_forward: Callable[[], None] = lambda: None):
    """model(x).shape, its buffers as they were."""
    with _BuffersKept(model):
        before_forward()
        return model(x).shape


@torch.no_grad()
def near_kinks(model: torch.nn.Module, x: torch.Tensor, before_forward: Callable[[], None] = lambda: None,
               seed: int = KINK_SEED, probe: float = KINK_PROBE) -> torch.Tensor:
    """A bool mask of model(x)'s shape: True where the output sits at a kink of the function at
    the probe's resolution. `model` is the fp64 reference and `x` its fp64 input; its buffers
    (BatchNorm's running statistics in training mode) are restored after the probe's forwards, and
    `before_forward` runs before each of them (the caller's RNG state: one Dropout mask)."""
    r = _probe_direction(x, seed)
    outputs = []
    with _BuffersKept(model):
        for sign in (0.0, 1.0, -1.0):
            before_forward()
            outputs.append(model(x * (1 + sign * probe * r)))
    y, up, down = outputs
    first = (up - y).abs() + (down - y).abs()
    second = (up + down - 2 * y).abs()
    finite = torch.isfinite(first) & torch.isfinite(second)
    if not bool(finite.any()):
        return torch.zeros_like(finite)
    floor = KINK_FLOOR * first[finite].mean()
    return finite & (second > KINK_RATIO * torch.maximum(first, floor))


def jump_mask(model: torch.nn.Module, x: torch.Tensor, before_forward: Callable[[], None] = lambda: None):
    """For the forward checks of a function that may jump (torch.where with branches that differ
    at its condition's boundary: threshold, hardshrink): the output elements at a kink or a jump of
    the fp64 model at x (near_kinks; a jump's second difference is as large as its first), else
    the rows holding them where those are at most KINK_MAX_ROWS of the rows, or None where neither
    fits (then nothing is left out).
    Where the exact value before the jump is nearer it than an fp32 GEMM's rounding, which side
    an implementation lands on is a coin toss, and the output there differs from fp64's by the
    whole jump (measured on an H100: hardshrink(0.1) in a chain, 7e-4 from fp64 where eager was
    5e-6, on one element of a million); at a kink (continuous) leaving the element out loses little."""
    mask = near_kinks(model, x, before_forward, probe=JUMP_PROBE)
    if int(mask.sum()) <= KINK_MAX_FRACTION * mask.numel():
        return mask
    # A row op after the jump (softmax, a row sum, GroupNorm) carries one element's jump into its
    # whole row: a few rows in a hundred of a 1024-wide softmax hold a crossing (measured: 4.4 %
    # of the rows of torch.div(z, -3, rounding_mode="floor") then softmax, at 1000 and 2051 rows).
    # Those rows are left out whole, as the gradient checks do (kink_free_gradient), up to
    # KINK_MAX_ROWS of them.
    row_any, rows = _rows_of(mask)
    return rows if int(row_any.sum()) <= KINK_MAX_ROWS * row_any.numel() else None


def _rows_of(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Which rows (first dimension) of `mask` hold a True, and the mask of those rows whole."""
    if mask.dim() == 0:   # a 0-d output (x.max() of everything): its one element is its row
        return mask.reshape(1), mask
    row_any = mask.reshape(mask.shape[0], -1).any(dim=1)
    return row_any, row_any.reshape(-1, *([1] * (mask.dim() - 1))).expand_as(mask)


def gradients(model: torch.nn.Module, x: torch.Tensor, g: torch.Tensor,
              before_forward: Callable[[], None] = lambda: None) -> tuple[torch.Tensor, ...]:
    """d(sum(g * model(x))) / d(x and every parameter); before_forward runs right before the
    forward (the caller's RNG state: one Dropout mask). A parameter only compared against
    (torch.where's threshold) gets no gradient: zeros, as .grad would hold after
    zero_grad(set_to_none=False)."""
    with torch.enable_grad():
        x = x.detach().clone().requires_grad_()
        before_forward()
        y = model(x)
        inputs = [x] + list(model.parameters())
        # (a frozen parameter, requires_grad False, gets zeros: autograd.grad refuses it)
        wanted = [t for t in inputs if t.requires_grad]
        found = dict(zip(map(id, wanted), torch.autograd.grad(y, wanted, g.to(y.dtype), allow_unused=True)))
    return tuple(torch.zeros_like(t) if found.get(id(t)) is None else found[id(t)] for t in inputs)


def gradient_is_smooth(model: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, tol: float,
                       before_forward: Callable[[], None] = lambda: None, seed: int = KINK_SEED) -> bool:
    """Whether the fp64 gradients for output gradient g have no jump between x (1 - v r), x and
    x (1 + v r), v = KINK_VERIFY, r the probe's direction (each tensor's second difference within
    KINK_SMOOTH x tol of its largest value)."""
    r = _probe_direction(x, seed)
    with _BuffersKept(model):
        largest = [float(d.abs().max()) for d in gradients(model, x, g, before_forward)]
        # Gradients are linear in the loss: the second difference is one gradient, of
        # L(x up) + L(x down) - 2 L(x), not three sets of the fp64 gradients held at once (8 GB
        # each for a 32768 x 32768 weight). dL/dx comes from the three inputs apart.
        with torch.enable_grad():
            xs = [(x * (1 + sign * KINK_VERIFY * r)).detach().requires_grad_() for sign in (1.0, -1.0, 0.0)]
            total = 0.0
            for xi, weight in zip(xs, (1.0, 1.0, -2.0)):
                before_forward()
                y = model(xi)
                total = total + weight * (y * g.to(y.dtype)).sum()
            params = [p for p in model.parameters() if p.requires_grad]   # (a frozen one: no gradient)
            grads = torch.autograd.grad(total, xs + params, allow_unused=True)
    up, down, mid = (torch.zeros_like(xi) if d is None else d for xi, d in zip(xs, grads[:3]))
    second = [up + down + mid] + [torch.zeros_like(p) if d is None else d for p, d in zip(params, grads[3:])]
    largest = largest[:1] + [m for m, p in zip(largest[1:], model.parameters()) if p.requires_grad]
    # (not >: a NaN difference counts as smooth, as it did with the three gradients apart)
    return not any(float(d.abs().max()) > KINK_SMOOTH * tol * m for d, m in zip(second, largest))


def kink_free_gradient(model: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, tol: float,
                       before_forward: Callable[[], None] = lambda: None) -> tuple[torch.Tensor, str]:
    """g with the output elements at a kink of the fp64 `model` set to 0 (each marked element, else
    each row with one), where that leaves the fp64 gradients without a jump; else g as it is. And
    a note saying which (empty: no kink)."""
    kinks = near_kinks(model, x, before_forward)
    n = int(kinks.sum())
    if n == 0:
        return g, ""
    for probes in range(2):
        if probes:
            # An element whose value barely moves along the probe's direction (its first
            # differences under KINK_FLOOR of the mean) is no kink to near_kinks, yet a crossing
            # within the verification's smaller move still flips its gradient, and with it every
            # mask failed (measured on an H200: Linear, x2, LeakyReLU at 2048 x 1024 -> 32, one
            # step in 20 left unmasked and an element at 2.6e-8 from its kink flipped by the
            # file's rounding, 129x eager's spread). Along a second direction it moves: the
            # elements marked along either are left out.
            kinks = kinks | near_kinks(model, x, before_forward, seed=KINK_SEED + 1)
            n = int(kinks.sum())
        row_any, rows = _rows_of(kinks)
        for what, mask, left, cap in (("element(s)", kinks, n, KINK_MAX_FRACTION * kinks.numel()),
                                      ("row(s)", rows, int(row_any.sum()), KINK_MAX_ROWS * row_any.numel())):
            if left > cap:
                continue
            masked = g.masked_fill(mask.to(g.device), 0.0)
            if gradient_is_smooth(model, x, masked, tol, before_forward):
                return masked, f"{left} output {what} at a kink of the reference left out"
    return g, (f"{n} output element(s) at a kink of the reference, and no mask of them (or of their rows) "
               "takes the jump out of the fp64 gradients: judged as they are")
