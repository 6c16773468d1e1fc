"""A reduced-precision math's rounding of a GEMM's operands, computed by torch: the search's probe
of what a math can meet (tune/search.probe_maths) and the gate's eager yardstick for a file of
bf16 or fp16 products (validate.eager_matmul_math) both run the reference module with every GEMM's
two operands rounded as kgen's kernels round them, and the products summed in fp32 or fp64."""

from __future__ import annotations

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


def gemm_operands_rounded(math: str, overflows: list | None = None):
    """A torch function mode in which every GEMM call (F.linear, matmul and @, mm, addmm, einsum:
    the calls kgen's frontend takes as GEMMs) sees its two operands rounded to `math`'s operand
    precision, as each GEMM part's kernel rounds them: its input, which after the first GEMM is
    an activation the module computed (a chained module's), and its weight, stored or computed.
    A bias is not an operand (the kernels add it in fp32). Autograd passes a gradient through the
    rounding unchanged (a cast would round it to the 16-bit type too, where kgen's backward GEMMs
    keep it fp32). Where a rounding makes an operand infinite that was finite
    (fp16's range), `overflows` (where given) gets a note."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    from kgen.frontend.trace import einsum_form

    # (the two operands per function: their positions and their keywords, as the frontend binds
    # them; einsum's are its tensors after the equation, in its GEMM forms only: 'bn,n->bn' is a
    # product the kernels compute in fp32)
    operands = {F.linear: ((0, 1), ("input", "weight")), torch.matmul: ((0, 1), ("input", "other")),
                torch.Tensor.matmul: ((0, 1), ("other",)), torch.Tensor.__matmul__: ((0, 1), ()),
                torch.Tensor.__rmatmul__: ((0, 1), ()), torch.mm: ((0, 1), ("input", "mat2")),
                torch.Tensor.mm: ((0, 1), ("mat2",)), torch.addmm: ((1, 2), ("mat1", "mat2")),
                torch.Tensor.addmm: ((1, 2), ("mat1", "mat2"))}
    note = "a GEMM's operand inside the module"

    def rounded(t):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        r = round_to(math, t, t.dtype)
        if t.requires_grad:
            r = t + (r - t).detach()   # (exactly r: r - t is exact, r representable)
        if overflows is not None and note not in overflows and torch.isinf(r).sum() > torch.isinf(t).sum():
            overflows.append(note)
        return r

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.einsum and args and isinstance(args[0], str) and einsum_form(args[0]) in ("gemm_nk", "gemm_kn"):
                tensors = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
                return func(args[0], *[rounded(t) for t in tensors], **kwargs)
            if func in operands:
                positions, names = operands[func]
                args = tuple(rounded(a) if i in positions else a for i, a in enumerate(args))
                kwargs = {k: rounded(v) if k in names else v for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return Mode()
