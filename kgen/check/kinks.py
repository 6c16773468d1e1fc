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

The gradient checks then weight those elements' output gradient by 0: a flip there changes
nothing they compare, and every other element is judged as before. Where more than
KINK_MAX_FRACTION of the output is marked (a sum over a row of kinked values marks most rows), no
element is left out and the check says so.
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
# Above this fraction of marked elements the probe gives up (nothing left out).
KINK_MAX_FRACTION = 0.01


@torch.no_grad()
def near_kinks(model: torch.nn.Module, x: torch.Tensor, before_forward: Callable[[], None] = lambda: None,
               seed: int = 11) -> torch.Tensor:
    """A bool mask of model(x)'s shape: True where the output sits at a kink of the function at
    the probe's resolution. `model` is the fp64 reference and `x` its fp64 input; its buffers
    (BatchNorm's running statistics in training mode) are restored after the probe's forwards, and
    `before_forward` runs before each of them (the caller's RNG state: one Dropout mask)."""
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    r = torch.randn(x.shape, generator=torch.Generator(device=x.device).manual_seed(seed), device=x.device,
                    dtype=x.dtype)
    outputs = []
    try:
        for sign in (0.0, 1.0, -1.0):
            before_forward()
            outputs.append(model(x * (1 + sign * KINK_PROBE * r)))
    finally:
        for name, b in model.named_buffers():
            b.copy_(buffers[name])
    y, up, down = outputs
    first = (up - y).abs() + (down - y).abs()
    second = (up + down - 2 * y).abs()
    finite = torch.isfinite(first) & torch.isfinite(second)
    if not bool(finite.any()):
        return torch.zeros_like(finite)
    floor = KINK_FLOOR * first[finite].mean()
    return finite & (second > KINK_RATIO * torch.maximum(first, floor))


def masked_output_gradient(g: torch.Tensor, kinks: torch.Tensor) -> tuple[torch.Tensor, str]:
    """g with the elements at kinks set to 0, and a note saying how many (g as it is, and why,
    where more than KINK_MAX_FRACTION are marked)."""
    n = int(kinks.sum())
    if n == 0:
        return g, ""
    if n > KINK_MAX_FRACTION * kinks.numel():
        return g, (f"{n} of {kinks.numel()} output elements at a kink of the reference, more than "
                   f"{KINK_MAX_FRACTION:.0%}: none left out")
    return g.masked_fill(kinks.to(g.device), 0.0), f"{n} output element(s) at a kink of the reference left out"
