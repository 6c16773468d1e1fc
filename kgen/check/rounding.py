"""A reduced-precision math's rounding of a GEMM's operands, computed by torch: the search's probe
of what a math can meet (tune/search.probe_maths) and the gate's eager yardstick for a file of
bf16 or fp16 products (validate.eager_matmul_math) both run the reference module with every GEMM's
two operands rounded as kgen's kernels round them, and the products summed in fp32 or fp64."""

from __future__ import annotations

from typing import Callable

import torch

from kgen.tune.spec import ROUND16_MATHS


def round_to(math: str, t: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """t rounded to the operand precision of a reduced-precision math mode (tf32, bf16, fp16),
    held in `dtype` (exactly: every such value is an fp32 value)."""
    t32 = t.float()
    if math in ROUND16_MATHS:
        # (fp16: an operand beyond 65504 becomes infinite, as in the GEMM)
        return t32.to(torch.bfloat16 if math == "bf16" else torch.float16).to(dtype)
    # TF32 keeps 10 mantissa bits: round the fp32 pattern to nearest at bit 13.
    bits = (t32.view(torch.int32) + 0x1000) & ~0x1FFF
    return bits.view(torch.float32).to(dtype)


def gemm_operands_rounded(math: str, overflows: list | None = None, rounds: Callable[[int, int], bool] = lambda k, m: True,
                          unrounded_gradients: bool = True):
    """A torch function mode in which every GEMM call (F.linear, matmul and @, mm, addmm, einsum:
    the calls kgen's frontend takes as GEMMs) computes on its two operands rounded to `math`'s
    operand precision, as each GEMM part's kernel rounds them: its input, which after the first
    GEMM is an activation the module computed (a chained module's), and its weight, stored or
    computed. A bias is not an operand (the kernels add it in fp32). `rounds(k, m)`: whether a
    GEMM that sums over k for m rows runs the math's products (a wgmma bf16 / fp16 file runs TF32
    at K % 8 != 0, configs.gemm_math, and fp32-accurate products at a few rows); the others
    compute on their operands as they are.

    The result's value is the rounded operands' product, f(T(x), T(w)). Its gradient, with
    `unrounded_gradients`, is the unrounded operands' (a wgmma file's backward GEMMs run TF32 on
    the fp32 operands): f(T(x), T(w)) + (z - z.detach()) for z = f(x, w), where z is finite;
    else the rounded operands' (the cuBLAS and mma.sync files' backward GEMMs run the math's
    products too), each operand T(t) + (t - t.detach()) where t is finite. Where a rounding makes
    an operand infinite that was finite (fp16's range), `overflows` (where given) gets a note."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    from kgen.frontend.trace import einsum_form

    # (the two operands per function: their positions and their keywords, as the frontend binds
    # them, the product's left operand first; einsum's are its tensors after the equation, in its
    # GEMM forms only: 'bn,n->bn' is a product the kernels compute in fp32)
    operands = {F.linear: ((0, 1), ("input", "weight")), torch.matmul: ((0, 1), ("input", "other")),
                torch.Tensor.matmul: ((0, 1), ("other",)), torch.Tensor.__matmul__: ((0, 1), ()),
                torch.Tensor.__rmatmul__: ((0, 1), ()), torch.mm: ((0, 1), ("input", "mat2")),
                torch.Tensor.mm: ((0, 1), ("mat2",)), torch.addmm: ((1, 2), ("mat1", "mat2")),
                torch.Tensor.addmm: ((1, 2), ("mat1", "mat2"))}
    note = "a GEMM's operand inside the module"

    def rounded(t):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        r = round_to(math, t.detach(), t.dtype)
        if overflows is not None and note not in overflows and torch.isinf(r).sum() > torch.isinf(t).sum():
            overflows.append(note)
        return r

    def rounded_passing_gradients(t):
        r = rounded(t)
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            return r
        # (the value r exactly; t's gradient through; an infinite t, whose t - t is NaN, gives r)
        return torch.where(torch.isfinite(t), r + (t - t.detach()), r)

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.einsum and args and isinstance(args[0], str) and einsum_form(args[0]) in ("gemm_nk", "gemm_kn"):
                tensors = list(args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:])
                left, inputs = (tensors[0] if tensors else None), tensors

                def call(r):
                    return func(args[0], *[r(t) for t in tensors], **kwargs)
            elif func in operands:
                positions, names = operands[func]
                # (t @ w as w.__rmatmul__(t): the left operand is the second argument)
                left = (args[1] if func is torch.Tensor.__rmatmul__ else
                        args[positions[0]] if len(args) > positions[0] else kwargs.get(names[0]))
                inputs = [a for i, a in enumerate(args) if i in positions] + [v for k, v in kwargs.items() if k in names]

                def call(r):
                    return func(*[r(a) if i in positions else a for i, a in enumerate(args)],
                                **{k: r(v) if k in names else v for k, v in kwargs.items()})
            else:
                return func(*args, **kwargs)
            if (not isinstance(left, torch.Tensor) or left.dim() == 0 or left.shape[-1] == 0
                    or not rounds(left.shape[-1], left.numel() // left.shape[-1])):
                return func(*args, **kwargs)
            if not torch.is_grad_enabled() or not any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
                return call(rounded)
            if not unrounded_gradients:
                return call(rounded_passing_gradients)
            z_rounded, z = call(rounded), call(lambda t: t)
            # (the value z_rounded exactly; z's gradient through where z is finite)
            return torch.where(torch.isfinite(z), z_rounded + (z - z.detach()), z_rounded)

    return Mode()
