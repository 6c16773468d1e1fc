"""The vector-Jacobian product of every point-wise op of kgen.ir.ops, written once for two back ends.

Each derivative is a Python function of a *math builder* `m`: with `TorchMath` it computes the
VJP on tensors (the oracle, checked against torch.autograd of the op's torch definition by the
CPU tests), with `CudaMath` it writes the same formula as a CUDA fp32 expression (compiled by
nvcc in the CPU tests) for the backward kernels. One definition, so the two cannot drift apart.

`vjp(m, g, y, *operands, **attrs)` returns one gradient per operand (None where none flows:
detach): `g` is the gradient of the op's result, `y` the result, `operands` the op's inputs. The formulas are torch's own
(tools/autograd/derivatives.yaml and the ATen backward kernels), kinks included: relu passes no
gradient at 0, hardtanh none at its bounds, clamp all of it at its bounds, abs none at 0,
leaky_relu the negative slope at 0, elu and selu the negative branch at 0, minimum and maximum
half to each operand where they tie.

`DERIVATIVES` has an entry for every op of `ops.POINTWISE` (a test ties the two tables).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from kgen.ir.ops import POINTWISE, SELU_ALPHA, SELU_SCALE, _resolve, cuda_float


class TorchMath:
    """The builder on tensors (any dtype; the oracle runs in fp64). Python numbers are constants."""

    @staticmethod
    def c(value: float):
        return value

    add = staticmethod(lambda a, b: a + b)
    sub = staticmethod(lambda a, b: a - b)
    mul = staticmethod(lambda a, b: a * b)
    div = staticmethod(lambda a, b: a / b)
    neg = staticmethod(lambda a: -a)
    exp = staticmethod(torch.exp)
    log1p = staticmethod(torch.log1p)
    tanh = staticmethod(torch.tanh)
    erf = staticmethod(torch.erf)
    log = staticmethod(torch.log)
    powt = staticmethod(lambda a, b: torch.pow(a, b))
    sin = staticmethod(torch.sin)
    cos = staticmethod(torch.cos)
    sinh = staticmethod(torch.sinh)
    cosh = staticmethod(torch.cosh)
    sqrt = staticmethod(torch.sqrt)
    sign = staticmethod(torch.sign)
    pow = staticmethod(lambda a, e: torch.pow(a, e))
    gt = staticmethod(lambda a, b: torch.as_tensor(a > b))
    ge = staticmethod(lambda a, b: torch.as_tensor(a >= b))
    lt = staticmethod(lambda a, b: torch.as_tensor(a < b))
    le = staticmethod(lambda a, b: torch.as_tensor(a <= b))
    eq = staticmethod(lambda a, b: torch.as_tensor(a == b))
    ne = staticmethod(lambda a, b: torch.as_tensor(a != b))
    both = staticmethod(lambda p, q: p & q)

    @staticmethod
    def where(cond, a, b):
        like = next(v for v in (cond, a, b) if isinstance(v, torch.Tensor))
        a = a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.float64, device=like.device)
        b = b if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=torch.float64, device=like.device)
        dtype = a.dtype if a.is_floating_point() else b.dtype
        return torch.where(cond, a.to(dtype), b.to(dtype))


class CudaMath:
    """The builder on CUDA fp32 expressions (strings); every result is parenthesized."""

    @staticmethod
    def c(value: float) -> str:
        return cuda_float(value)

    add = staticmethod(lambda a, b: f"(({a}) + ({b}))")
    sub = staticmethod(lambda a, b: f"(({a}) - ({b}))")
    mul = staticmethod(lambda a, b: f"(({a}) * ({b}))")
    div = staticmethod(lambda a, b: f"(({a}) / ({b}))")
    neg = staticmethod(lambda a: f"(-({a}))")
    exp = staticmethod(lambda a: f"expf(({a}))")
    log1p = staticmethod(lambda a: f"log1pf(({a}))")
    tanh = staticmethod(lambda a: f"tanhf(({a}))")
    erf = staticmethod(lambda a: f"erff(({a}))")
    log = staticmethod(lambda a: f"logf(({a}))")
    powt = staticmethod(lambda a, b: f"powf(({a}), ({b}))")
    sin = staticmethod(lambda a: f"sinf(({a}))")
    cos = staticmethod(lambda a: f"cosf(({a}))")
    sinh = staticmethod(lambda a: f"sinhf(({a}))")
    cosh = staticmethod(lambda a: f"coshf(({a}))")
    sqrt = staticmethod(lambda a: f"sqrtf(({a}))")
    # copysignf would give ±1 at ±0; torch.sign(0) is 0 (and NaN stays NaN).
    sign = staticmethod(lambda a: f"(({a}) > 0.0f ? 1.0f : (({a}) < 0.0f ? -1.0f : ({a}) * 0.0f))")
    pow = staticmethod(lambda a, e: f"powf(({a}), {cuda_float(e)})")
    gt = staticmethod(lambda a, b: f"(({a}) > ({b}))")
    ge = staticmethod(lambda a, b: f"(({a}) >= ({b}))")
    lt = staticmethod(lambda a, b: f"(({a}) < ({b}))")
    le = staticmethod(lambda a, b: f"(({a}) <= ({b}))")
    eq = staticmethod(lambda a, b: f"(({a}) == ({b}))")
    ne = staticmethod(lambda a, b: f"(({a}) != ({b}))")
    both = staticmethod(lambda p, q: f"(({p}) && ({q}))")
    where = staticmethod(lambda cond, a, b: f"(({cond}) ? ({a}) : ({b}))")


# ---- the derivatives (torch's formulas) ------------------------------------------------------
def _logit(m, g, x, eps):
    """ATen's logit_backward: g / (x (1 - x)) inside [eps, 1 - eps] (0 outside); without eps, NaN
    outside [0, 1]."""
    from kgen.ir.ops import _logit_bounds

    inside = m.div(g, m.mul(x, m.sub(m.c(1.0), x)))
    if eps is None or eps < 0:
        lo, hi, outside = 0.0, 1.0, m.c(float("nan"))
    else:
        (lo, hi), outside = _logit_bounds(eps), m.c(0.0)
    return (m.where(m.lt(x, m.c(lo)), outside, m.where(m.gt(x, m.c(hi)), outside, inside)),)



def _pow(m, g, y, x, exponent):
    if exponent == 0.0:
        return (m.mul(g, m.c(0.0)),)
    return (m.mul(g, m.mul(m.c(exponent), m.pow(x, exponent - 1.0))),)


def _pow_tensor(m, g, y, a, b):
    # torch's pow_backward_self: 0 where the exponent is 0, else g b a^(b - 1); and
    # pow_backward_exponent: 0 where a == 0 and b >= 0, else g y log(a)
    da = m.where(m.eq(b, m.c(0.0)), m.c(0.0), m.mul(g, m.mul(b, m.powt(a, m.sub(b, m.c(1.0))))))
    db = m.where(m.both(m.eq(a, m.c(0.0)), m.ge(b, m.c(0.0))), m.c(0.0), m.mul(g, m.mul(y, m.log(a))))
    return (da, db)


def _gelu(m, g, y, x, approximate):
    if approximate == "none":
        cdf = m.mul(m.c(0.5), m.add(m.c(1.0), m.erf(m.mul(x, m.c(math.sqrt(0.5))))))
        pdf = m.mul(m.exp(m.mul(m.c(-0.5), m.mul(x, x))), m.c(2.0 / math.sqrt(math.pi) * math.sqrt(0.5) * 0.5))
        return (m.mul(g, m.add(cdf, m.mul(x, pdf))),)
    beta, kappa = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, 0.044715
    x_sq = m.mul(x, x)
    inner = m.mul(m.c(beta), m.add(x, m.mul(m.c(kappa), m.mul(x_sq, x))))
    t = m.tanh(inner)
    left_derivative = m.mul(m.c(0.5), m.add(m.c(1.0), t))
    right_derivative = m.mul(m.mul(m.mul(m.c(0.5), x), m.sub(m.c(1.0), m.mul(t, t))),
                             m.mul(m.c(beta), m.add(m.c(1.0), m.mul(m.c(3.0 * kappa), x_sq))))
    return (m.mul(g, m.add(left_derivative, right_derivative)),)


def _sigmoid_of(m, x):
    return m.div(m.c(1.0), m.add(m.c(1.0), m.exp(m.neg(x))))


def _silu(m, g, y, x):
    s = _sigmoid_of(m, x)
    return (m.mul(g, m.mul(s, m.add(m.c(1.0), m.mul(x, m.sub(m.c(1.0), s))))),)


def _mish(m, g, y, x):
    s = _sigmoid_of(m, x)
    t = m.tanh(m.log1p(m.exp(x)))
    return (m.mul(g, m.add(t, m.mul(m.mul(x, s), m.sub(m.c(1.0), m.mul(t, t))))),)


def _softplus(m, g, y, x, beta, threshold):
    z = m.exp(m.mul(x, m.c(beta)))
    return (m.where(m.gt(m.mul(x, m.c(beta)), m.c(threshold)), g, m.div(m.mul(g, z), m.add(z, m.c(1.0)))),)


def _clamp(m, g, y, x, min, max):
    if min is not None and max is not None:
        inside = m.both(m.ge(x, m.c(min)), m.le(x, m.c(max)))
    elif min is not None:
        inside = m.ge(x, m.c(min))
    else:
        inside = m.le(x, m.c(max))
    return (m.where(inside, g, m.c(0.0)),)


def _minimum(m, g, y, a, b):
    """torch's rule (derivatives.yaml): half the gradient to each operand where a == b, all of
    it to the smaller one elsewhere, and all of it to both where either is NaN (no comparison
    holds there)."""
    tie = m.both(m.le(a, b), m.ge(a, b))
    half = m.div(g, m.c(2.0))
    return (m.where(tie, half, m.where(m.gt(a, b), m.c(0.0), g)),
            m.where(tie, half, m.where(m.lt(a, b), m.c(0.0), g)))


def _fmax_fmin(keeps):
    """torch's fmax / fmin rule: all of the gradient to a where a >= b (fmin: a <= b) or b is NaN,
    else to b; no sharing at ties."""
    def vjp(m, g, y, a, b):
        to_a = m.where(keeps(m, a, b), m.c(1.0), m.where(m.ne(b, b), m.c(1.0), m.c(0.0)))
        return (m.mul(g, to_a), m.mul(g, m.sub(m.c(1.0), to_a)))
    return vjp


def _maximum(m, g, y, a, b):
    """As _minimum, the larger operand taking the gradient."""
    tie = m.both(m.le(a, b), m.ge(a, b))
    half = m.div(g, m.c(2.0))
    return (m.where(tie, half, m.where(m.lt(a, b), m.c(0.0), g)),
            m.where(tie, half, m.where(m.gt(a, b), m.c(0.0), g)))


def _where(m, g, y, lhs, rhs, a, b, compare):
    """torch's rule: g to a where the condition holds, to b elsewhere; none to the comparison's
    operands (a comparison has no gradient; where they are a or b too, those uses get theirs)."""
    cond = getattr(m, compare)(lhs, rhs)
    return (None, None, m.where(cond, g, m.c(0.0)), m.where(cond, m.c(0.0), g))


Vjp = Callable[..., tuple]
DERIVATIVES: dict[str, Vjp] = {
    "add": lambda m, g, y, a, b: (g, g),
    "sub": lambda m, g, y, a, b: (g, m.neg(g)),
    "mul": lambda m, g, y, a, b: (m.mul(g, b), m.mul(g, a)),
    # torch's div_tensor_other_backward: -g ((a / b) / b), a / b computed again from the operands
    # (not the result, which a 16-bit build rounds, and which a backward pass that needs only a
    # would then compute for nothing): g a / b^2 underflowed b^2 (|b| < ~1e-19 in fp32) to 0,
    # giving inf or NaN where torch's is finite.
    "div": lambda m, g, y, a, b: (m.div(g, b), m.mul(m.neg(g), m.div(m.div(a, b), b))),
    "neg": lambda m, g, y, x: (m.neg(g),),
    "abs": lambda m, g, y, x: (m.mul(g, m.sign(x)),),
    "exp": lambda m, g, y, x: (m.mul(g, y),),
    "log": lambda m, g, y, x: (m.div(g, x),),
    "log1p": lambda m, g, y, x: (m.div(g, m.add(m.c(1.0), x)),),
    "logit": lambda m, g, y, x, eps: _logit(m, g, x, eps),
    # torch's: g / (1 + exp(b - a)) to a, g / (1 + exp(a - b)) to b
    "logaddexp": lambda m, g, y, a, b: (m.div(g, m.add(m.c(1.0), m.exp(m.sub(b, a)))),
                                        m.div(g, m.add(m.c(1.0), m.exp(m.sub(a, b))))),
    "frac": lambda m, g, y, x: (g,),   # (torch's: the gradient passes through)
    "expm1": lambda m, g, y, x: (m.mul(g, m.add(y, m.c(1.0))),),
    "exp2": lambda m, g, y, x: (m.mul(g, m.mul(y, m.c(math.log(2.0)))),),
    "log2": lambda m, g, y, x: (m.div(g, m.mul(x, m.c(math.log(2.0)))),),
    "log10": lambda m, g, y, x: (m.div(g, m.mul(x, m.c(math.log(10.0)))),),
    # d erf(x) / dx = 2 / sqrt(pi) exp(-x^2)
    "erf": lambda m, g, y, x: (m.mul(g, m.mul(m.c(1.1283791670955126), m.exp(m.neg(m.mul(x, x))))),),
    # d erfc(x) / dx = -2 / sqrt(pi) exp(-x^2)
    "erfc": lambda m, g, y, x: (m.mul(g, m.mul(m.c(-1.1283791670955126), m.exp(m.neg(m.mul(x, x))))),),
    "atan": lambda m, g, y, x: (m.div(g, m.add(m.c(1.0), m.mul(x, x))),),
    # the normal density, exp(-x^2 / 2) / sqrt(2 pi)
    "ndtr": lambda m, g, y, x: (m.mul(g, m.mul(m.c(0.3989422804014327), m.exp(m.mul(m.c(-0.5), m.mul(x, x))))),),
    # torch's: 1 / sqrt(1 - x^2), its negative, 1 / sqrt(x^2 + 1), 1 / sqrt(x^2 - 1), 1 / (1 - x^2)
    # (acosh's finite below -1, where acosh itself is NaN, as torch's is).
    "asin": lambda m, g, y, x: (m.div(g, m.sqrt(m.sub(m.c(1.0), m.mul(x, x)))),),
    "acos": lambda m, g, y, x: (m.neg(m.div(g, m.sqrt(m.sub(m.c(1.0), m.mul(x, x))))),),
    "asinh": lambda m, g, y, x: (m.div(g, m.sqrt(m.add(m.mul(x, x), m.c(1.0)))),),
    "acosh": lambda m, g, y, x: (m.div(g, m.sqrt(m.sub(m.mul(x, x), m.c(1.0)))),),
    "atanh": lambda m, g, y, x: (m.div(g, m.sub(m.c(1.0), m.mul(x, x))),),
    # torch's: cos x, -sin x, 1 + tan^2 x (of the result), cosh x, sinh x.
    "sin": lambda m, g, y, x: (m.mul(g, m.cos(x)),),
    "cos": lambda m, g, y, x: (m.mul(g, m.neg(m.sin(x))),),
    "tan": lambda m, g, y, x: (m.mul(g, m.add(m.c(1.0), m.mul(y, y))),),
    "sinh": lambda m, g, y, x: (m.mul(g, m.cosh(x)),),
    "cosh": lambda m, g, y, x: (m.mul(g, m.sinh(x)),),
    # Rounding: zeros, as torch's backward (where NaN or an infinite gradient arrives too).
    **{name: (lambda m, g, y, x, **_: (m.where(m.eq(x, x), m.c(0.0), m.c(0.0)),))
       for name in ("floor", "ceil", "round", "trunc", "floor_divide")},
    # fmod / remainder by a constant: the gradient passes (torch's `self: grad`).
    "fmod": lambda m, g, y, x, other: (g,),
    "remainder": lambda m, g, y, x, other: (g,),
    "sqrt": lambda m, g, y, x: (m.div(g, m.mul(m.c(2.0), y)),),
    # torch's norm_backward and std_backward: 0 where the result is 0
    "norm_sqrt": lambda m, g, y, x: (m.where(m.eq(y, m.c(0.0)), m.c(0.0), m.div(g, m.mul(m.c(2.0), y))),),
    "rsqrt": lambda m, g, y, x: (m.mul(m.mul(m.c(-0.5), g), m.mul(m.mul(y, y), y)),),
    "pow": _pow,
    "pow_tensor": _pow_tensor,
    # torch's pow_backward_exponent: grad * (result * log(base)), log(base) a double made fp32.
    "rpow": lambda m, g, y, x, base: (m.mul(g, m.mul(y, m.c(math.log(base)))),),
    # torch's threshold_backward(g, y, 0): y <= 0 ? 0 : g, so a NaN passes g (no comparison
    # holds at NaN; y > 0 ? g : 0 gave it 0).
    "relu": lambda m, g, y, x: (m.where(m.le(y, m.c(0.0)), m.c(0.0), g),),
    "leaky_relu": lambda m, g, y, x, negative_slope: (
        m.where(m.gt(x, m.c(0.0)), g, m.mul(g, m.c(negative_slope))),),
    "gelu": _gelu,
    "sigmoid": lambda m, g, y, x: (m.mul(m.mul(g, m.sub(m.c(1.0), y)), y),),
    "tanh": lambda m, g, y, x: (m.mul(g, m.sub(m.c(1.0), m.mul(y, y))),),
    "silu": _silu,
    "mish": _mish,
    "softplus": _softplus,
    "hardtanh": lambda m, g, y, x, min_val, max_val: (
        m.where(m.both(m.gt(x, m.c(min_val)), m.lt(x, m.c(max_val))), g, m.c(0.0)),),
    "hardsigmoid": lambda m, g, y, x: (
        m.where(m.both(m.gt(x, m.c(-3.0)), m.lt(x, m.c(3.0))), m.div(g, m.c(6.0)), m.c(0.0)),),
    "hardswish": lambda m, g, y, x: (
        m.where(m.le(x, m.c(-3.0)), m.c(0.0),
                m.where(m.lt(x, m.c(3.0)), m.mul(g, m.add(m.div(x, m.c(3.0)), m.c(0.5))), g)),),
    "elu": lambda m, g, y, x, alpha: (
        m.where(m.le(x, m.c(0.0)), m.mul(m.mul(g, m.c(alpha)), m.exp(x)), g),),
    "selu": lambda m, g, y, x: (
        m.where(m.le(x, m.c(0.0)), m.mul(m.mul(g, m.c(SELU_ALPHA * SELU_SCALE)), m.exp(x)),
                m.mul(g, m.c(SELU_SCALE))),),
    "clamp": _clamp,
    "minimum_const": lambda m, g, y, x, other: (m.where(m.le(x, m.c(other)), g, m.c(0.0)),),
    "maximum_const": lambda m, g, y, x, other: (m.where(m.ge(x, m.c(other)), g, m.c(0.0)),),
    "minimum": _minimum,
    "fmax": _fmax_fmin(lambda m, a, b: m.ge(a, b)),
    "fmin": _fmax_fmin(lambda m, a, b: m.le(a, b)),
    "maximum": _maximum,
    "where": _where,
    "identity": lambda m, g, y, x: (g,),
    "to_float32": lambda m, g, y, x: (g,),
    "to_opmath": lambda m, g, y, x: (g,),
    "to_module_dtype": lambda m, g, y, x: (g,),
    "zero_if_inf": lambda m, g, y, x: (m.where(m.eq(y, x), g, m.c(0.0)),),   # (y == x where x is finite)
    "detach": lambda m, g, y, x: (None,),   # no gradient flows back
}


def vjp(m, name: str, g, y, operands, attrs=None) -> tuple:
    """The gradients of op `name`'s operands, built with `m` (TorchMath or CudaMath)."""
    op = POINTWISE[name]
    return DERIVATIVES[name](m, g, y, *operands, **_resolve(op, operands, attrs))


def torch_vjp(name: str, g: torch.Tensor, y: torch.Tensor, operands, attrs=None) -> tuple:
    return vjp(TorchMath, name, g, y, operands, attrs)


def cuda_vjp(name: str, g: str, y: str, operands: list[str], attrs=None,
             number_in_dtype: str | None = None) -> tuple[str, ...]:
    """The CUDA VJP of op `name`; `number_in_dtype` (a device function's name): the numbers of
    its formula (m.c) rounded to the module's dtype by it, for the ops of
    BACKWARD_NUMBERS_IN_TENSOR_DTYPE in a 16-bit build."""
    return vjp(CudaMath if number_in_dtype is None else _NumbersIn(number_in_dtype), name, g, y, operands, attrs)


class _NumbersIn(CudaMath):
    """CudaMath with every number rounded by the device function `rounding` (a comparison's
    bounds in the tensor's dtype; the formula's 0.0 stays 0)."""

    def __init__(self, rounding: str):
        self.rounding = rounding

    def c(self, value: float) -> str:
        return cuda_float(value) if value == 0.0 else f"{self.rounding}({cuda_float(value)})"


# The ops whose VJP selects the gradient (all of g, none, a share) by comparing their operands or
# result, and reads them for nothing else. The backward recomputes the forward's values without
# rounding them to a 16-bit module's dtype (lower.backward); eager's backward compares the 16-bit
# values the forward held (the saved input or result, or the forward's own mask for where), so
# a 16-bit build's backward compares these ops' operands rounded to the module's dtype, as its
# forward held them (lower.backward._vjp; the identity in an fp32 build). Unrounded, relu's y
# of 1e-8 passed its gradient where fp16's forward gave 0, and `torch.where(y > 0.1, ...)`
# sent the gradient to the other side of the forward's choice at y just above 0.1.
COMPARED_AS_HELD = frozenset({"where", "clamp", "hardtanh", "minimum_const", "maximum_const", "relu",
                              "leaky_relu", "minimum", "maximum", "fmax", "fmin"})
# Those among them whose numbers eager's backward compares in the tensor's dtype: where's mask is
# its forward's (ops.NUMBER_OPERANDS_IN_TENSOR_DTYPE), clamp's backward compares the input with
# its bounds as Scalars (FunctionsManual's clamp_backward: self >= min, CUDA's compare kernels
# reading scalar_t), and so do clamp_min / clamp_max (minimum_const / maximum_const).
# hardtanh_backward_cuda compares with its bounds as opmath_t (float): not rounded; relu,
# leaky_relu and the others compare with 0 or none.
BACKWARD_NUMBERS_IN_TENSOR_DTYPE = frozenset({"where", "clamp", "minimum_const", "maximum_const"})
