"""The fp64 judge's Dropout masks: the ones the module's own dtype draws.

A Dropout in training mode draws its mask from the CUDA RNG, and the checks start every forward
from one RNG state so that ModelNew, eager and the fp64 reference draw the same mask (kgen's
files draw torch's own: F.dropout of ones in the module's dtype, kgen.frontend.trace). On the GPU
the mask torch draws depends on the tensor's dtype, not only on the RNG state and the shape: its
fused kernel maps the random numbers to elements by a vector width of the element's size
(measured on an H200, session 37: KernelBench 66's fp32 input gradient 1.39e-4 from the fp64
reference's, of a largest value of 2.26e-4, in ModelNew and eager alike). An fp64 reference drew
another mask, and the checks compared two modules with one mask against a module with another.

`masks_drawn_in(model64, dtype)` makes the fp64 reference draw each Dropout mask as torch draws it
for a tensor of `dtype` (F.dropout of ones in that dtype, from the RNG state of the moment) and
apply it in fp64: x * keep / (1 - p). On the CPU torch draws one mask for every dtype; there
this changes nothing.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# The functions a Dropout of the reference runs (nn.Dropout calls F.dropout); kgen's trace
# refuses the others (alpha_dropout, dropout1d, ...) in training mode.
_DROPOUTS = {F.dropout: ("input", "p", "training", "inplace"), torch.dropout: ("input", "p", "train"),
             torch.dropout_: ("input", "p", "train")}


def _arguments(names, args, kwargs) -> dict:
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


class _MasksIn(TorchFunctionMode):
    """Inside it, a dropout of an fp64 tensor in training mode draws its mask in `dtype`."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _DROPOUTS:
            return func(*args, **kwargs)
        a = _arguments(_DROPOUTS[func], args, kwargs)
        x, p = a["input"], float(a.get("p", 0.5))
        training = a.get("training", a.get("train", True))
        if not (isinstance(x, torch.Tensor) and x.dtype == torch.float64 and training and p > 0.0):
            return func(*args, **kwargs)
        # (the mode is off while its handler runs: this F.dropout is torch's own)
        keep = F.dropout(torch.ones(x.shape, dtype=self.dtype, device=x.device), p, True) != 0
        scaled = keep.to(torch.float64) if p >= 1.0 else keep.to(torch.float64) / (1.0 - p)
        if a.get("inplace", False) or func is torch.dropout_:
            return x.mul_(scaled)
        return x * scaled


def masks_drawn_in(model64: torch.nn.Module, dtype: torch.dtype, dropouts=(True,)) -> torch.nn.Module:
    """`model64` (the fp64 reference), its forward now drawing each Dropout mask as a tensor of
    `dtype` draws it (this module's docstring). Where it has no Dropout (`dropouts`: the IR's,
    EmittedFile.dropouts, empty) or `dtype` is fp64 itself: the model as it is."""
    if dtype == torch.float64 or not dropouts:
        return model64

    def forward_with_masks(self, *args, **kwargs):
        with _MasksIn(dtype):
            return type(self).forward(self, *args, **kwargs)

    # A method of the instance (a deep copy of the model binds it to the copy).
    model64.forward = types.MethodType(forward_with_masks, model64)
    return model64
