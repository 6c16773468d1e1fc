"""The one table of point-wise ops: name -> CUDA fp32 expression -> torch oracle.

A GEMM's epilogue chain is made of point-wise ops (add a bias, scale, an activation, a clamp).
Each op is defined here once, and both sides of kgen read the same definition: the code
generator writes the op's CUDA expression from `PointwiseOp.cuda`, and the IR's torch
interpreter runs `PointwiseOp.torch`, which calls torch's own function for the op, as the
oracle the generated kernel is validated against. An op added, renamed or changed here
changes both, so the two cannot drift apart.

The CUDA expressions follow torch's fp32 kernels (ATen's CUDA and CPU code) formula for
formula, and use only the accurate CUDA math functions (expf, logf, erff, ...): no fast-math
intrinsics (__expf, __fdividef, ...) and no rsqrtf, because the kernels are judged against
fp64 at fp32 accuracy. Where torch's kernel is less accurate than the plain formula (torch's
rsqrt calls rsqrtf; hardsigmoid and hardswish multiply by fp32(1/6)), the table takes the
accurate form (1.0f / sqrtf(x); a division by 6); where an equally accurate form is much cheaper
in an epilogue (mish's tanh(log1p(exp(x))) as a ratio of one exp), it takes that, measured. NaN inputs propagate as they do in torch.

Conventions:
- `cuda(*operands, **attrs)` takes fp32 operand expressions (strings) and the attribute values
  (Python numbers or strings), parenthesizes every use of an operand, may use an operand more
  than once (the generator passes plain variable names), and returns a primary expression (a
  call or a parenthesized expression) that is safe to use as an operand in turn. Numbers are
  written with `cuda_float`.
- `torch(*operands, **attrs)` returns the tensor torch computes; binary oracles take a Python
  number for either operand.
- `attrs` lists each attribute with its default: a float (a numeric attribute), a str (a string
  attribute, not written as a float: gelu's approximate), None (an optional numeric attribute
  that is absent by default: clamp's min and max, torch.clamp's own convention) or `REQUIRED`
  (a numeric attribute the caller must give: pow's exponent, the constant of minimum_const and
  maximum_const).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy
import torch
import torch.nn.functional as F


class _Required:
    """The default of an attribute that has none: the caller must give a value."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

# torch's SELU constants (ATen/native/Activation.cpp); torch multiplies them in fp32.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
GELU_APPROXIMATIONS = ("none", "tanh")


@dataclasses.dataclass(frozen=True)
class PointwiseOp:
    name: str
    arity: int  # operands: 1 unary, 2 binary, 4 where (lhs, rhs, a, b)
    cuda: Callable[..., str]  # cuda(*operand_exprs, **attrs) -> CUDA fp32 expression
    torch: Callable[..., torch.Tensor]  # torch(*operands, **attrs) -> tensor (the oracle)
    attrs: tuple[tuple[str, float | str | None | _Required], ...] = ()  # (name, default)
    doc: str = ""  # one line: what it is, as torch defines it


def cuda_float(value: float) -> str:
    """The CUDA fp32 literal of `value` rounded to fp32 (as torch rounds a scalar for an fp32
    kernel): 9 significant digits, which read back as the same fp32, and an 'f'. Infinities
    (values beyond fp32's range included) are INFINITY / -INFINITY, NaN is NAN."""
    if isinstance(value, (bool, str)) or not isinstance(value, numbers.Real):
        raise TypeError(f"cuda_float needs a real number, got {value!r}")
    with numpy.errstate(over="ignore"):
        single = numpy.float32(value)
    if numpy.isnan(single):
        return "NAN"
    if numpy.isinf(single):
        return "INFINITY" if single > 0 else "-INFINITY"
    text = f"{float(single):.9g}"
    if "." not in text and "e" not in text:
        text += ".0"  # "2f" is no C literal; "2.0f" is
    return text + "f"


# ----------------------------------------------------------------------------------------------
# Helpers for the definitions.

_f = cuda_float


def _nan_or(a: str, expr: str) -> str:
    """`expr`, except that a NaN operand comes out as itself (fminf / fmaxf drop a NaN operand,
    torch's clamp, hardtanh and hardsigmoid propagate it)."""
    return f"(({a}) != ({a}) ? ({a}) : {expr})"


def _as_tensors(operands: Sequence[torch.Tensor | float]) -> list[torch.Tensor]:
    """Operands as tensors: a Python number becomes a 0-dim tensor of the first tensor
    operand's dtype and device (torch computes a tensor-scalar op in the tensor's dtype), or a
    float64 one where no operand is a tensor."""
    like = next((o for o in operands if isinstance(o, torch.Tensor)), None)
    dtype = like.dtype if like is not None else torch.float64
    device = like.device if like is not None else None
    return [o if isinstance(o, torch.Tensor) else torch.tensor(o, dtype=dtype, device=device)
            for o in operands]


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch's binary `fn`, taking a Python number for either operand. (A number on the left
    would otherwise go through Tensor.__rtruediv__, which is reciprocal() * number.)"""

    def oracle(a, b):
        return fn(*_as_tensors([a, b]))

    oracle.__name__ = fn.__name__
    return oracle


def _pow_cuda(a: str, exponent: float) -> str:
    # torch's pow(tensor, scalar) special-cases these exponents (ATen/native/cuda/PowKernel.cu,
    # native/Pow.cpp); rsqrt is written 1 / sqrt, the accurate form.
    special = {
        0.0: "(1.0f)",
        1.0: f"({a})",
        2.0: f"(({a}) * ({a}))",
        3.0: f"(({a}) * ({a}) * ({a}))",
        0.5: f"sqrtf(({a}))",
        -0.5: f"(1.0f / sqrtf(({a})))",
        -1.0: f"(1.0f / ({a}))",
        -2.0: f"(1.0f / (({a}) * ({a})))",
    }
    return special.get(exponent, f"powf(({a}), {_f(exponent)})")


def _round_cuda(a: str, decimals: float) -> str:
    # ATen's round_decimals_kernel: 10^|d| in fp32, x * 10^d rounded then / 10^d (d > 0), or
    # x / 10^-d rounded then * 10^-d (d < 0).
    if decimals != int(decimals):
        raise ValueError(f"round's decimals must be a whole number, got {decimals!r}")
    if decimals == 0:
        return f"rintf(({a}))"
    scale = _f(10.0 ** abs(decimals))
    if decimals > 0:
        return f"(rintf(({a}) * {scale}) / {scale})"
    return f"(rintf(({a}) / {scale}) * {scale})"


def _remainder_cuda(a: str, other: float, divisor: str | None = None) -> str:
    # ATen's remainder of floats: m = fmod(a, b); m + b where m != 0 and m's sign differs from b's.
    b = divisor or _f(other)
    m = f"fmodf(({a}), {b})"
    differs = f"{m} > 0.0f" if other < 0 else f"{m} < 0.0f"
    return f"({differs} ? {m} + {b} : {m})"


def _floor_divide_cuda(a: str, other: float) -> str:
    # ATen's div_floor of floats by a number, as its CUDA kernel computes it: the quotient of
    # a - fmod(a, b) times 1 / b (in fp32), one less where the remainder's sign differs from b's,
    # floored, and one more where the floor lost more than a half (the product's rounding); a zero
    # quotient takes the sign of a / b. By 0, its true division (+-inf, NaN).
    if other == 0.0:   # (a / +-0: ATen's a * (1 / b))
        return f"(({a}) * {_f(math.copysign(math.inf, other))})"
    inv = _f(float(numpy.float32(1.0) / numpy.float32(other)))
    m = f"fmodf(({a}), {_f(other)})"
    differs = f"{m} > 0.0f" if other < 0 else f"{m} < 0.0f"
    q = f"((({a}) - {m}) * {inv} - ({differs} ? 1.0f : 0.0f))"
    return (f"({q} == 0.0f ? copysignf(0.0f, ({a}) * {inv}) "
            f": floorf({q}) + ({q} - floorf({q}) > 0.5f ? 1.0f : 0.0f))")


def _check_gelu(approximate: str) -> None:
    if approximate not in GELU_APPROXIMATIONS:
        raise ValueError(f"gelu's approximate must be one of {GELU_APPROXIMATIONS}, got {approximate!r}")


def _gelu_cuda(a: str, approximate: str) -> str:
    _check_gelu(approximate)
    if approximate == "none":
        # 0.5 x (1 + erf(x / sqrt(2)))
        return f"(0.5f * ({a}) * (1.0f + erff(({a}) * {_f(math.sqrt(0.5))})))"
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    inner = f"{_f(math.sqrt(2.0 / math.pi))} * (({a}) + {_f(0.044715)} * (({a}) * ({a}) * ({a})))"
    return f"(0.5f * ({a}) * (1.0f + tanhf({inner})))"


def _gelu_torch(x: torch.Tensor, approximate: str) -> torch.Tensor:
    _check_gelu(approximate)
    return F.gelu(x, approximate=approximate)


def _check_clamp(min: float | None, max: float | None) -> None:
    if min is None and max is None:
        raise ValueError("clamp needs the attribute 'min' or 'max' (or both)")


def _clamp_torch(x: torch.Tensor, min: float | None, max: float | None) -> torch.Tensor:
    _check_clamp(min, max)
    return torch.clamp(x, min=min, max=max)


def _clamp_cuda(a: str, min: float | None, max: float | None) -> str:
    _check_clamp(min, max)
    if max is None:
        return _nan_or(a, f"fmaxf(({a}), {_f(min)})")
    if min is None:
        return _nan_or(a, f"fminf(({a}), {_f(max)})")
    return _nan_or(a, f"fminf(fmaxf(({a}), {_f(min)}), {_f(max)})")


# torch.where(lhs <compare> rhs, a, b): the comparisons a condition may make, as CUDA and torch
# write them. A NaN compares false (b is taken), except by `ne`, in both.
COMPARISONS = {"gt": (">", torch.gt), "ge": (">=", torch.ge), "lt": ("<", torch.lt), "le": ("<=", torch.le),
               "eq": ("==", torch.eq), "ne": ("!=", torch.ne)}


def _check_compare(compare: str) -> None:
    if compare not in COMPARISONS:
        raise ValueError(f"where's compare must be one of {tuple(COMPARISONS)}, got {compare!r}")


def _where_cuda(lhs: str, rhs: str, a: str, b: str, compare: str) -> str:
    _check_compare(compare)
    return f"(({lhs}) {COMPARISONS[compare][0]} ({rhs}) ? ({a}) : ({b}))"


def _where_torch(lhs, rhs, a, b, compare: str) -> torch.Tensor:
    """torch.where(compare(lhs, rhs), a, b); the operands are tensors (torch_apply made any
    Python number a 0-dim tensor of the tensors' dtype, as torch takes a scalar in a tensor op)."""
    _check_compare(compare)
    return torch.where(COMPARISONS[compare][1](lhs, rhs), a, b)


def _mish_cuda(a: str) -> str:
    n = f"expf(({a}))"
    m = f"({n} * ({n} + 2.0f))"
    return f"(({a}) > 20.0f ? ({a}) : ({a}) * ({m} / ({m} + 2.0f)))"


def _hard_sigmoid_cuda(a: str) -> str:
    """relu6(x + 3) / 6 without the NaN guard."""
    return f"fminf(fmaxf(({a}) + 3.0f, 0.0f), 6.0f) / 6.0f"


# torch.selu(x) is elu(x, alpha=SELU_ALPHA, scale=SELU_SCALE): x > 0 ? x * scale
# : expm1(x) * (alpha * scale), the product taken in fp32 (ATen/native/cuda/ActivationEluKernel.cu).
_SELU_NEGCOEF = float(numpy.float32(SELU_ALPHA) * numpy.float32(SELU_SCALE))


# ----------------------------------------------------------------------------------------------
# The table.

def _logit_bounds(eps: float) -> tuple[float, float]:
    """torch.logit's clamp with eps: [eps, 1 - eps], 1 - eps computed in fp32 as ATen's kernel does."""
    return float(numpy.float32(eps)), float(numpy.float32(1.0) - numpy.float32(eps))


def _logit_cuda(a: str, eps: float | None) -> str:
    # ATen's logit kernel: x clamped to [eps, 1 - eps] (NaN stays NaN) unless eps is None, then
    # log(z / (1 - z))
    if eps is None or eps < 0:
        return f"logf((({a}) / (1.0f - ({a}))))"
    lo, hi = (cuda_float(v) for v in _logit_bounds(eps))
    z = f"(({a}) < {lo} ? {lo} : (({a}) > {hi} ? {hi} : ({a})))"
    return f"logf(({z} / (1.0f - {z})))"


def _logaddexp_cuda(a: str, b: str) -> str:
    # ATen's: a where both are the same infinity, else max(a, b) + log1p(exp(-|a - b|))
    return (f"((fabsf(({a})) == INFINITY && ({a}) == ({b})) ? ({a}) : "
            f"(fmaxf(({a}), ({b})) + log1pf(expf(-fabsf(({a}) - ({b}))))))")


_DEFINITIONS = (
    # Binary.
    PointwiseOp("add", 2, lambda a, b: f"(({a}) + ({b}))", _binary(torch.add),
                doc="a + b (torch.add)"),
    PointwiseOp("sub", 2, lambda a, b: f"(({a}) - ({b}))", _binary(torch.sub),
                doc="a - b (torch.sub)"),
    PointwiseOp("mul", 2, lambda a, b: f"(({a}) * ({b}))", _binary(torch.mul),
                doc="a * b (torch.mul)"),
    PointwiseOp("div", 2, lambda a, b: f"(({a}) / ({b}))", _binary(torch.div),
                doc="a / b, true division (torch.div)"),
    PointwiseOp("logaddexp", 2, _logaddexp_cuda, _binary(torch.logaddexp),
                doc="log(e^a + e^b) (torch.logaddexp)"),
    # Unary arithmetic.
    PointwiseOp("neg", 1, lambda a: f"(-({a}))", torch.neg, doc="-x (torch.neg)"),
    PointwiseOp("abs", 1, lambda a: f"fabsf(({a}))", torch.abs, doc="|x| (torch.abs)"),
    PointwiseOp("exp", 1, lambda a: f"expf(({a}))", torch.exp, doc="e^x (torch.exp)"),
    PointwiseOp("log", 1, lambda a: f"logf(({a}))", torch.log, doc="natural logarithm (torch.log)"),
    PointwiseOp("log1p", 1, lambda a: f"log1pf(({a}))", torch.log1p, doc="log(1 + x), accurate near 0 (torch.log1p)"),
    PointwiseOp("logit", 1, _logit_cuda, lambda x, eps: torch.logit(x, eps), (("eps", None),),
                doc="log(x / (1 - x)), x clamped to [eps, 1 - eps] where eps is given (torch.logit)"),
    PointwiseOp("expm1", 1, lambda a: f"expm1f(({a}))", torch.expm1, doc="e^x - 1, accurate near 0 (torch.expm1)"),
    PointwiseOp("exp2", 1, lambda a: f"exp2f(({a}))", torch.exp2, doc="2^x (torch.exp2)"),
    PointwiseOp("log2", 1, lambda a: f"log2f(({a}))", torch.log2, doc="base-2 logarithm (torch.log2)"),
    PointwiseOp("log10", 1, lambda a: f"log10f(({a}))", torch.log10, doc="base-10 logarithm (torch.log10)"),
    PointwiseOp("erf", 1, lambda a: f"erff(({a}))", torch.erf, doc="the error function (torch.erf)"),
    PointwiseOp("erfc", 1, lambda a: f"erfcf(({a}))", torch.erfc,
                doc="1 - erf(x), accurate where erf(x) is near 1 (torch.erfc)"),
    PointwiseOp("atan", 1, lambda a: f"atanf(({a}))", torch.atan, doc="arctangent (torch.atan)"),
    # The standard normal CDF as torch computes it, (1 + erf(x / sqrt 2)) / 2 (a composite of
    # fp32 ops in torch: in the left tail it loses what erfc(-x / sqrt 2) / 2 would keep, as eager
    # does; measured on an H200, the erfc form was "wrong" against torch's own fp64 there).
    # x * ndtr(x) is the exact GELU.
    PointwiseOp("ndtr", 1, lambda a: f"((1.0f + erff(({a}) * 0.70710678118654752440f)) * 0.5f)", torch.special.ndtr,
                doc="the standard normal distribution function (torch.special.ndtr)"),
    # The other inverse functions: CUDA's, as torch's fp32 kernels call them (NaN outside their
    # domains, as torch's).
    PointwiseOp("asin", 1, lambda a: f"asinf(({a}))", torch.asin, doc="arcsine (torch.asin)"),
    PointwiseOp("acos", 1, lambda a: f"acosf(({a}))", torch.acos, doc="arccosine (torch.acos)"),
    PointwiseOp("asinh", 1, lambda a: f"asinhf(({a}))", torch.asinh, doc="inverse hyperbolic sine (torch.asinh)"),
    PointwiseOp("acosh", 1, lambda a: f"acoshf(({a}))", torch.acosh, doc="inverse hyperbolic cosine (torch.acosh)"),
    PointwiseOp("atanh", 1, lambda a: f"atanhf(({a}))", torch.atanh, doc="inverse hyperbolic tangent (torch.atanh)"),
    # The trigonometric and hyperbolic functions: CUDA's sinf ... coshf (full range reduction,
    # as torch's fp32 kernels call them; never the __sinf intrinsics).
    PointwiseOp("sin", 1, lambda a: f"sinf(({a}))", torch.sin, doc="sine (torch.sin)"),
    PointwiseOp("cos", 1, lambda a: f"cosf(({a}))", torch.cos, doc="cosine (torch.cos)"),
    PointwiseOp("tan", 1, lambda a: f"tanf(({a}))", torch.tan, doc="tangent (torch.tan)"),
    PointwiseOp("sinh", 1, lambda a: f"sinhf(({a}))", torch.sinh, doc="hyperbolic sine (torch.sinh)"),
    PointwiseOp("cosh", 1, lambda a: f"coshf(({a}))", torch.cosh, doc="hyperbolic cosine (torch.cosh)"),
    # Rounding to an integer: no gradient (torch's backward is zeros); a jump at every boundary
    # (JUMPING). round: to nearest, ties to even, as torch.round (decimals=0) and CUDA's rintf.
    PointwiseOp("floor", 1, lambda a: f"floorf(({a}))", torch.floor, doc="round down (torch.floor)"),
    PointwiseOp("ceil", 1, lambda a: f"ceilf(({a}))", torch.ceil, doc="round up (torch.ceil)"),
    PointwiseOp("round", 1, _round_cuda, lambda x, decimals: torch.round(x, decimals=int(decimals)),
                attrs=(("decimals", 0.0),),
                doc="round to nearest, ties to even; with decimals, x * 10^d rounded, / 10^d (torch.round)"),
    PointwiseOp("trunc", 1, lambda a: f"truncf(({a}))", torch.trunc, doc="round toward zero (torch.trunc)"),
    # x - trunc(x): the gradient passes through (torch's), a jump at every integer (JUMPING)
    PointwiseOp("frac", 1, lambda a: f"(({a}) - truncf(({a})))", torch.frac,
                doc="the fractional part, x - trunc(x) (torch.frac)"),
    # The remainders of a division by a constant: fmod's has the sign of x (C's fmodf), remainder's
    # the sign of the divisor (ATen's: fmod, then + other where the signs differ). A jump at every
    # multiple of `other`.
    PointwiseOp("fmod", 1, lambda a, other, divisor=None: f"fmodf(({a}), {divisor or _f(other)})",
                lambda x, other: torch.fmod(x, other), attrs=(("other", REQUIRED),),
                doc="x - trunc(x / other) * other, other a number (torch.fmod)"),
    PointwiseOp("remainder", 1, _remainder_cuda, lambda x, other: torch.remainder(x, other),
                attrs=(("other", REQUIRED),),
                doc="x - floor(x / other) * other, other a number; x % other (torch.remainder)"),
    PointwiseOp("floor_divide", 1, _floor_divide_cuda, lambda x, other: torch.div(x, other, rounding_mode="floor"),
                attrs=(("other", REQUIRED),),
                doc="floor(x / other), other a number; x // other (torch.floor_divide, div(rounding_mode='floor'))"),
    PointwiseOp("sqrt", 1, lambda a: f"sqrtf(({a}))", torch.sqrt, doc="square root (torch.sqrt)"),
    # The square root that ends a 2-norm (torch.norm, x.norm, F.normalize) or a std: its value
    # sqrt's, its gradient 0 where it is 0, as torch's norm and std backward give it (sqrt's
    # would be inf there, and inf times the squares' 2 x = 0 a NaN: a zero row, a padded batch's,
    # made every weight's gradient NaN).
    PointwiseOp("norm_sqrt", 1, lambda a: f"sqrtf(({a}))", torch.sqrt,
                doc="the square root ending a 2-norm or a std, gradient 0 at 0 (torch.norm, F.normalize, torch.std)"),
    PointwiseOp("rsqrt", 1, lambda a: f"(1.0f / sqrtf(({a})))", torch.rsqrt,
                doc="1 / sqrt(x) (torch.rsqrt)"),
    PointwiseOp("pow", 1, _pow_cuda, lambda x, exponent: torch.pow(x, exponent),
                attrs=(("exponent", REQUIRED),),
                doc="x ** exponent, a constant exponent (torch.pow(x, exponent))"),
    # a ** b of two values (a parameter as the exponent, x ** x): ATen's pow of two tensors, powf.
    PointwiseOp("pow_tensor", 2, lambda a, b: f"powf(({a}), ({b}))", _binary(torch.pow),
                doc="a ** b, both tensors (torch.pow(a, b))"),
    # base ** x: ATen's pow(Scalar, Tensor), powf of the base in fp32 (1 ** x is 1, NaN included).
    PointwiseOp("rpow", 1, lambda a, base: "(1.0f)" if base == 1.0 else f"powf({_f(base)}, ({a}))",
                lambda x, base: torch.pow(base, x), attrs=(("base", REQUIRED),),
                doc="base ** x, a constant base (torch.pow(base, x))"),
    # Activations.
    PointwiseOp("relu", 1, lambda a: f"(({a}) < 0.0f ? 0.0f : ({a}))", torch.relu,
                doc="max(x, 0), NaN propagating (torch.relu)"),
    PointwiseOp("leaky_relu", 1,
                lambda a, negative_slope: f"(({a}) > 0.0f ? ({a}) : ({a}) * {_f(negative_slope)})",
                lambda x, negative_slope: F.leaky_relu(x, negative_slope),
                attrs=(("negative_slope", 0.01),),
                doc="x if x > 0 else negative_slope * x (F.leaky_relu)"),
    PointwiseOp("gelu", 1, _gelu_cuda, _gelu_torch,
                attrs=(("approximate", "none"),),
                doc="0.5 x (1 + erf(x / sqrt 2)); approximate='tanh': "
                    "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (F.gelu)"),
    PointwiseOp("sigmoid", 1, lambda a: f"(1.0f / (1.0f + expf(-({a}))))", torch.sigmoid,
                doc="1 / (1 + exp(-x)) (torch.sigmoid)"),
    PointwiseOp("tanh", 1, lambda a: f"tanhf(({a}))", torch.tanh, doc="tanh(x) (torch.tanh)"),
    PointwiseOp("silu", 1, lambda a: f"(({a}) / (1.0f + expf(-({a}))))", F.silu,
                doc="x * sigmoid(x), as x / (1 + exp(-x)) (F.silu)"),
    # tanh(log1p(e^x)) is n (n + 2) / (n (n + 2) + 2) with n = e^x: one expf and a division,
    # where torch's kernels call expf, log1pf and tanhf (three times the instructions in an
    # epilogue that runs after the mainloop: KernelBench 29 has two). As accurate against fp64
    # (measured over [-30, 30] and 1e6 normal draws x 5: max relative error 2.9e-7 against
    # torch's form's 2.1e-7, mean 3.1e-8 against 2.5e-8; the GPU tier compares it with torch's
    # own kernel). From x = 20 on the ratio is 1.0f (and n (n + 2) would overflow from x = 44):
    # x itself, as torch's form gives. NaN and -inf give NaN, +inf itself, as torch's.
    PointwiseOp("mish", 1, lambda a: _mish_cuda(a), F.mish,
                doc="x * tanh(softplus(x)), as x * n (n + 2) / (n (n + 2) + 2), n = exp(x) (F.mish)"),
    PointwiseOp("softplus", 1,
                lambda a, beta, threshold: (f"(({a}) * {_f(beta)} > {_f(threshold)} ? ({a}) : "
                                            f"log1pf(expf(({a}) * {_f(beta)})) / {_f(beta)})"),
                lambda x, beta, threshold: F.softplus(x, beta=beta, threshold=threshold),
                attrs=(("beta", 1.0), ("threshold", 20.0)),
                doc="log1p(exp(beta x)) / beta, x where beta x > threshold (F.softplus)"),
    PointwiseOp("hardtanh", 1,
                lambda a, min_val, max_val: _nan_or(a, f"fminf(fmaxf(({a}), {_f(min_val)}), {_f(max_val)})"),
                lambda x, min_val, max_val: F.hardtanh(x, min_val=min_val, max_val=max_val),
                attrs=(("min_val", -1.0), ("max_val", 1.0)),
                doc="min(max(x, min_val), max_val), NaN propagating (F.hardtanh)"),
    PointwiseOp("hardsigmoid", 1, lambda a: _nan_or(a, f"({_hard_sigmoid_cuda(a)})"), F.hardsigmoid,
                doc="min(max(x + 3, 0), 6) / 6, NaN propagating (F.hardsigmoid)"),
    PointwiseOp("hardswish", 1, lambda a: f"(({a}) * {_hard_sigmoid_cuda(a)})", F.hardswish,
                doc="x * min(max(x + 3, 0), 6) / 6 (F.hardswish)"),
    PointwiseOp("elu", 1, lambda a, alpha: f"(({a}) > 0.0f ? ({a}) : expm1f(({a})) * {_f(alpha)})",
                lambda x, alpha: F.elu(x, alpha=alpha), attrs=(("alpha", 1.0),),
                doc="x if x > 0 else alpha * (exp(x) - 1), with expm1 (F.elu)"),
    PointwiseOp("selu", 1,
                lambda a: f"(({a}) > 0.0f ? ({a}) * {_f(SELU_SCALE)} : expm1f(({a})) * {_f(_SELU_NEGCOEF)})",
                F.selu, doc="scale * elu(x, alpha), torch's alpha and scale (F.selu)"),
    PointwiseOp("clamp", 1, _clamp_cuda, _clamp_torch,
                attrs=(("min", None), ("max", None)),
                doc="min(max(x, min), max), either bound may be absent, NaN propagating (torch.clamp)"),
    PointwiseOp("minimum_const", 1, lambda a, other: _nan_or(a, f"fminf(({a}), {_f(other)})"),
                lambda x, other: torch.clamp_max(x, other), attrs=(("other", REQUIRED),),
                doc="min(x, other) with a constant other, NaN propagating (torch.clamp_max)"),
    PointwiseOp("maximum_const", 1, lambda a, other: _nan_or(a, f"fmaxf(({a}), {_f(other)})"),
                lambda x, other: torch.clamp_min(x, other), attrs=(("other", REQUIRED),),
                doc="max(x, other) with a constant other, NaN propagating (torch.clamp_min)"),
    # torch.minimum / torch.maximum (and torch.min / torch.max of two tensors): a NaN in either
    # operand comes out (ATen's minimum_kernel_cuda tests a, then b, then takes ::min).
    PointwiseOp("minimum", 2, lambda a, b: _nan_or(a, _nan_or(b, f"fminf(({a}), ({b}))")),
                _binary(torch.minimum),
                doc="min(a, b) of two tensors, NaN propagating from either (torch.minimum)"),
    PointwiseOp("maximum", 2, lambda a, b: _nan_or(a, _nan_or(b, f"fmaxf(({a}), ({b}))")),
                _binary(torch.maximum),
                doc="max(a, b) of two tensors, NaN propagating from either (torch.maximum)"),
    # torch.fmax / torch.fmin: a NaN operand is ignored (C's fmaxf / fminf, which ATen calls).
    PointwiseOp("fmax", 2, lambda a, b: f"fmaxf(({a}), ({b}))", _binary(torch.fmax),
                doc="max(a, b), a NaN operand ignored (torch.fmax)"),
    PointwiseOp("fmin", 2, lambda a, b: f"fminf(({a}), ({b}))", _binary(torch.fmin),
                doc="min(a, b), a NaN operand ignored (torch.fmin)"),
    # torch.where with a comparison as its condition: operands (lhs, rhs, a, b); the comparison
    # is no value of its own (the IR's values are all floats), and no gradient flows through it.
    PointwiseOp("where", 4, _where_cuda, _where_torch, attrs=(("compare", "gt"),),
                doc="a where lhs <compare> rhs else b (torch.where(lhs > rhs, a, b) for compare='gt')"),
    PointwiseOp("identity", 1, lambda a: f"({a})", lambda x: x, doc="x (nn.Identity)"),
    # The shift logsumexp subtracts from its row, as torch's logsumexp takes it: the row's max, or
    # 0 where that is infinite (so a row of -inf gives -inf, one holding +inf gives +inf, where
    # x - max would be inf - inf, NaN).
    PointwiseOp("zero_if_inf", 1, lambda a: f"(fabsf({a}) == INFINITY ? 0.0f : ({a}))",
                lambda x: torch.where(torch.isinf(x), torch.zeros_like(x), x),
                doc="x, or 0 where x is +-inf (logsumexp's shift)"),
    # A cast between the module's dtype and float32 (x.float() and x.to(x.dtype) in a 16-bit
    # module, an upcast for a softmax or a norm and back): the value itself in the kernels, which
    # compute in fp32 registers; what changes is which results a 16-bit build rounds to the
    # module's dtype as eager's ops do: none from to_float32 on (Node.fp32), again from
    # to_module_dtype on. The oracle (Graph.part_values) casts as the module does.
    PointwiseOp("to_float32", 1, lambda a: f"({a})", lambda x: x.float(),
                doc="x in float32 (x.float(), x.to(torch.float32)): a 16-bit module's ops after it compute in fp32"),
    # The same upcast where torch's own kernel computes in float32 inside (its math type) and
    # rounds once at its end: torch.var / std, the 2-norm, ATen's rms_norm, which kgen writes with
    # several ops (Tracer._internal_upcast): float32 for a 16-bit x, x itself otherwise (a float64
    # reference's var is float64 throughout, where x.float() would round it).
    PointwiseOp("to_opmath", 1, lambda a: f"({a})",
                lambda x: x.float() if x.dtype in (torch.bfloat16, torch.float16) else x,
                doc="x in torch's math type (float32 for a 16-bit x): the steps of a reduction torch computes "
                    "in float32 and rounds once (var, std, the 2-norm, rms_norm)"),
    PointwiseOp("to_module_dtype", 1, lambda a: f"({a})", lambda x: x,
                doc="x back in the module's dtype (x.to(input.dtype) after an upcast)"),
    # The identity forward; backward, no gradient flows through it (kgen.ir.derivatives).
    PointwiseOp("detach", 1, lambda a: f"({a})", lambda x: x.detach(),
                doc="x, cut from autograd: no gradient flows back through it (Tensor.detach)"),
)

POINTWISE: dict[str, PointwiseOp] = {op.name: op for op in _DEFINITIONS}
assert len(POINTWISE) == len(_DEFINITIONS), "two point-wise ops share a name"
# The ops whose result jumps (where, at its condition's boundary; rounding, at every integer):
# an fp32 input a rounding error away from fp64's may land on the other side, so the gate leaves
# such output elements out of its forward comparisons (check/validate.may_jump, kinks.jump_mask).
JUMPING = frozenset({"where", "floor", "ceil", "round", "trunc", "frac", "fmod", "remainder", "floor_divide"})
assert JUMPING <= set(POINTWISE)
# The ops whose value is differentiable wherever it is finite: no kink, no jump (relu, abs, clamp,
# hardtanh, min / max and the like bend; pow's exponent decides, so it is left out). The gate's
# gradient checks look for output elements at a kink of the reference (check/kinks.py: 7-9 fp64
# forwards and backwards per look) only in a module with an op that is not smooth (`smooth`;
# check/validate.may_kink). Tied to the oracles by tests/test_ops_smooth.py.
SMOOTH = frozenset({"add", "sub", "mul", "div", "logaddexp", "neg", "exp", "log", "log1p", "expm1", "exp2", "log2", "log10",
                    "erf", "erfc", "atan", "ndtr", "asin", "acos", "asinh", "acosh", "atanh", "sin", "cos", "tan",
                    "sinh", "cosh", "sqrt", "norm_sqrt", "rsqrt", "gelu", "sigmoid", "tanh", "silu", "mish",
                    "identity", "to_float32", "to_opmath", "to_module_dtype", "detach", "zero_if_inf"})
assert SMOOTH <= set(POINTWISE) and not SMOOTH & JUMPING
# softplus is x itself where beta x passes its threshold: its derivative jumps there by
# 1 - sigmoid(threshold), its value by log1p(exp(-threshold)) / beta; from this threshold on
# (torch's default is 20: 2e-9) that is below every tolerance, and it counts as smooth.
SOFTPLUS_SMOOTH_THRESHOLD = 15.0


def smooth(name: str, attrs: Mapping | None = None) -> bool:
    """Whether point-wise op `name` with `attrs` has no kink or jump (SMOOTH; softplus by its
    threshold)."""
    if name == "softplus":
        return float(dict(attrs or {}).get("threshold", 20.0)) >= SOFTPLUS_SMOOTH_THRESHOLD
    if name == "logit":   # (without eps smooth where finite, inside (0, 1); eps's clamp bends it)
        return dict(attrs or {}).get("eps") is None
    return name in SMOOTH



def gives_a_number_for_nan(name: str, operands: Sequence[float | None], attrs: Mapping | None = None) -> bool:
    """Whether op `name` can turn NaN into a number: its torch oracle, with NaN in each operand
    that `operands` marks None in turn (the others as given: a constant's value, or any number),
    gives something other than NaN (where's untaken branch, fmax / fmin, nan_to_num, x ** 0).
    An upstream NaN where eager has +-inf is then no longer visible downstream but a wrong
    number (codegen: the tf32x3 split keeps infinities for such a chain)."""
    for i, operand in enumerate(operands):
        if operand is None:
            values = [float("nan") if j == i else (0.5 if o is None else o) for j, o in enumerate(operands)]
            if not bool(torch.isnan(torch_apply(name, values, attrs)).all()):
                return True
    return False


# ----------------------------------------------------------------------------------------------
# Lookups.

def _lookup(name: str) -> PointwiseOp:
    try:
        return POINTWISE[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown point-wise op {name!r}; known ops: {', '.join(POINTWISE)}") from None


def _resolve(op: PointwiseOp, operands: Sequence, attrs: Mapping | None) -> dict:
    """The op's attributes, defaults filled in and values checked; the operand count checked."""
    if len(operands) != op.arity:
        raise ValueError(f"{op.name} takes {op.arity} operand(s), got {len(operands)}")
    given = dict(attrs or {})
    defaults = dict(op.attrs)
    unknown = [key for key in given if key not in defaults]
    if unknown:
        known = ", ".join(defaults) or "none"
        raise ValueError(f"{op.name} has no attribute {unknown[0]!r}; its attributes: {known}")
    resolved = {}
    for key, default in op.attrs:
        value = given.get(key, default)
        if value is REQUIRED:
            raise ValueError(f"{op.name} needs the attribute {key!r}")
        if isinstance(default, str):
            if not isinstance(value, str):
                raise ValueError(f"{op.name}'s {key} must be a string, got {value!r}")
        elif value is None:
            if default is not None:
                raise ValueError(f"{op.name}'s {key} must be a number, got None")
        elif isinstance(value, (bool, str)) or not isinstance(value, numbers.Real):
            raise ValueError(f"{op.name}'s {key} must be a number, got {value!r}")
        else:
            value = float(value)
        resolved[key] = value
    return resolved


# The ops by a number whose CUDA kernels take the number in the tensor's own dtype: ATen's fmod and
# remainder of floats run gpu_kernel_with_scalars with a lambda of scalar_t arguments, so a 16-bit
# tensor's divisor is iter.scalar_value<scalar_t>, rounded to its dtype (y % 0.7 of a bf16 y
# divides by 0.69921875), where floor_divide's kernel reads it in its accumulate type, float32.
# A 16-bit build's CUDA rounds their divisor so (cuda_expr's `divisor`); the oracle calls torch's
# op on the tensor, which rounds it itself.
DIVISOR_IN_TENSOR_DTYPE = frozenset({"fmod", "remainder"})


# The operands of an op that its CUDA kernel reads in the tensor's own dtype where they are Python
# numbers: a comparison's (where's lhs and rhs: `y > 0.1`, `torch.where(y > t, ...)`, masked_fill's
# mask, F.threshold). ATen's compare_kernel_with_scalars (native/cuda/CompareKernels.cu) and
# threshold_kernel_cuda read the number as iter.scalar_value<scalar_t>() / Scalar::to<scalar_t>(),
# so a bf16 y is compared with bf16(0.1) = 0.10009765625 (y > 0.1 is false at y = bf16(0.1), where
# y > 0.1f is true). The oracle compares in the tensor's dtype already (_as_tensors); a 16-bit
# build's CUDA rounds the number so (cuda_expr's `number_in_dtype`). Clamp, hardtanh and
# min / max with a number need no such rounding: rounding is monotonic, so their result rounded to
# the dtype is the same either way.
NUMBER_OPERANDS_IN_TENSOR_DTYPE = {"where": (0, 1)}


def cuda_expr(name: str, operands: Sequence[str], attrs: Mapping | None = None,
              number_in_dtype: str | None = None, numbers: Sequence[int] = ()) -> str:
    """The CUDA fp32 expression of op `name` on the operand expressions, with `attrs` (missing
    ones take their defaults). `number_in_dtype`: the name of a device function (template)
    that rounds a number to the tensor's dtype, for the ops of DIVISOR_IN_TENSOR_DTYPE and the
    number operands of NUMBER_OPERANDS_IN_TENSOR_DTYPE (`numbers`: the indices of the operands that
    are Python numbers) where the value they meet is in a 16-bit dtype. ValueError names an
    unknown op or attribute, a missing required attribute, a bad value or a wrong operand count."""
    op = _lookup(name)
    resolved = _resolve(op, operands, attrs)
    if number_in_dtype is not None and name in DIVISOR_IN_TENSOR_DTYPE:
        return op.cuda(*operands, **resolved, divisor=f"{number_in_dtype}({_f(resolved['other'])})")
    if number_in_dtype is not None and name in NUMBER_OPERANDS_IN_TENSOR_DTYPE:
        rounded = set(numbers) & set(NUMBER_OPERANDS_IN_TENSOR_DTYPE[name])
        operands = [f"{number_in_dtype}({o})" if k in rounded else o for k, o in enumerate(operands)]
    return op.cuda(*operands, **resolved)


# The binary ops whose CUDA kernels take a Python number operand in the op's math type, float32
# for a 16-bit tensor (ATen's opmath_gpu_kernel_with_scalars and the ufunc add / sub read
# iter.scalar_value<opmath_t>, the number itself: TensorIterator casts no CPU scalar of a CUDA
# op), as kgen's kernels read a constant: `y * 1e5` of an fp16 y is finite where |y| < 0.65 (1e5
# is no fp16 number), `y * 0.1` is y times 0.1f, rounded once. (CPU eager rounds the number of an
# add or sub to the tensor's dtype first; its mul and div read the number itself.)
OPMATH_NUMBER = frozenset({"add", "sub", "mul", "div"})


def torch_apply(name: str, operands: Sequence[torch.Tensor | float],
                attrs: Mapping | None = None) -> torch.Tensor:
    """torch's result of op `name` (the oracle); a Python number operand is taken in the dtype of
    the tensor operand (float64 where there is none), but for the ops of OPMATH_NUMBER on a 16-bit
    tensor, computed in float32 with the number as it is and rounded once, as torch's CUDA kernels
    compute them. Errors as for cuda_expr."""
    op = _lookup(name)
    resolved = _resolve(op, operands, attrs)
    tensors = [o for o in operands if isinstance(o, torch.Tensor)]
    if name in OPMATH_NUMBER and len(tensors) < len(operands) and tensors \
            and tensors[0].dtype in (torch.bfloat16, torch.float16):
        wide = [o.float() if isinstance(o, torch.Tensor) else o for o in operands]
        return op.torch(*_as_tensors(wide), **resolved).to(tensors[0].dtype)
    return op.torch(*_as_tensors(operands), **resolved)
