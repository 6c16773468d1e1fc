"""From a reference module to the epilogue IR (kgen.ir.graph), with torch.fx.

The module is built on the meta device (no memory, no compute) and traced symbolically. Each
fx node maps to IR nodes through the tables below; anything else is refused with an
`ir.Unsupported` that names the op, its line in the reference file, and what kgen supports.
softmax, log_softmax and logsumexp are written out with max, sub, exp, sum, log and div (the
max-subtracted forms torch computes), so the lowering knows row reductions of four kinds only.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import dis
import functools
import inspect
import keyword
import math
import operator
import re
import sys

import numpy
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kgen.ir import ops
from kgen.ir.graph import (INPUT_PATH, input_path, UPDATED_IN_PLACE, Graph, Node, Unsupported, broadcast_shapes,
                           combine_levels, module_tensor, pooled_columns, pooled_width, self_attr, shape_text,
                           side_by_side, side_by_side_code, side_by_side_path, side_by_side_parts)
from kgen.frontend import autocast
from kgen.frontend.reference import USER_FAILURES, Reference
from kgen.frontend.reference import said as reference_said

# The dtypes of module (parameters and input) that kgen's files run: the IR is the same for all
# three; the emitted file builds its GEMM per dtype (codegen/generator.py, OPERAND_BUILDS).
MODULE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# ---- what kgen accepts -----------------------------------------------------------------------
# Activation modules: module type -> (op, {op attr: module attribute}).
ACTIVATION_MODULES = {
    nn.ReLU: ("relu", {}),
    nn.LeakyReLU: ("leaky_relu", {"negative_slope": "negative_slope"}),
    nn.GELU: ("gelu", {"approximate": "approximate"}),
    nn.Sigmoid: ("sigmoid", {}),
    nn.Tanh: ("tanh", {}),
    nn.SiLU: ("silu", {}),
    nn.Mish: ("mish", {}),
    nn.Softplus: ("softplus", {"beta": "beta", "threshold": "threshold"}),
    nn.Hardtanh: ("hardtanh", {"min_val": "min_val", "max_val": "max_val"}),
    nn.Hardsigmoid: ("hardsigmoid", {}),
    nn.Hardswish: ("hardswish", {}),
    nn.ELU: ("elu", {"alpha": "alpha"}),
    nn.SELU: ("selu", {}),
    nn.Identity: ("identity", {}),
}
# Activations torch defines from others (Tracer.composite writes them out with kgen's ops, in
# torch's own formula): module type -> (name, {argument: module attribute}).
COMPOSITE_MODULES = {
    nn.LogSigmoid: ("logsigmoid", {}),
    nn.Softsign: ("softsign", {}),
    nn.Tanhshrink: ("tanhshrink", {}),
    nn.Threshold: ("threshold", {"threshold": "threshold", "value": "value"}),
    nn.Hardshrink: ("hardshrink", {"lambd": "lambd"}),
    nn.Softshrink: ("softshrink", {"lambd": "lambd"}),
    nn.CELU: ("celu", {"alpha": "alpha"}),
}


# Signatures the tracer binds call arguments with (torch's own, reduced to what kgen reads).
def _unary(input): ...
def _binary(input, other, *, alpha=1): ...
def _div(input, other, *, rounding_mode=None): ...
def _round(input, *, decimals=0): ...
def _pow(input, exponent): ...
def _leaky_relu(input, negative_slope=0.01, inplace=False): ...
def _gelu(input, approximate="none"): ...
def _softplus(input, beta=1.0, threshold=20.0): ...
def _hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False): ...
def _elu(input, alpha=1.0, inplace=False): ...
def _act(input, inplace=False): ...
def _clamp(input, min=None, max=None): ...
def _logit(input, eps=None): ...
def _clamp_min(input, min): ...
def _clamp_max(input, max): ...
def _reduce(input, dim=None, keepdim=False, *, dtype=None): ...
def _softmax(input, dim=None, _stacklevel=3, dtype=None): ...
def _linear(input, weight, bias=None): ...
def _dropout(input, p=0.5, training=True, inplace=False): ...
def _torch_dropout(input, p, train): ...
def _rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False): ...
def _alpha_dropout(input, p=0.5, training=False, inplace=False): ...
def _instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                   momentum=0.1, eps=1e-05): ...
def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-05): ...
def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05): ...
def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True): ...
def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True): ...
def _normalize(input, p=2.0, dim=1, eps=1e-12, out=None): ...
def _max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False): ...
def _avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True): ...
def _adaptive_pool1d(input, output_size, return_indices=False): ...
def _unsqueeze(input, dim): ...
def _chunk(input, chunks, dim=0): ...
def _split(tensor, split_size_or_sections, dim=0): ...
def _glu(input, dim=-1): ...
def _narrow(input, dim, start, length): ...
def _addmm(input, mat1, mat2, *, beta=1, alpha=1): ...
def _binary_tensors(input, other): ...
def _squeeze(input, dim=None): ...
def _where(condition, input, other): ...
def _compare(input, other): ...
def _fill_like(input, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False,
               memory_format=torch.preserve_format): ...
def _threshold(input, threshold, value, inplace=False): ...
def _lerp(input, end, weight): ...
def _nan_to_num(input, nan=0.0, posinf=None, neginf=None): ...
def _shrink(input, lambd=0.5): ...
def _celu(input, alpha=1.0, inplace=False): ...
def _var(input, dim=None, unbiased=None, keepdim=False, *, correction=None): ...
def _norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None): ...
def _vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None): ...
def _batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                eps=1e-05): ...
def _full_like(input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
               requires_grad=False, memory_format=torch.preserve_format): ...


# Point-wise functions: callable -> (signature, op, {op attr: argument}).
_TORCH_UNARY = {
    torch.relu: "relu", torch.sigmoid: "sigmoid", torch.tanh: "tanh", torch.exp: "exp",
    torch.log: "log", torch.log1p: "log1p", torch.erf: "erf", torch.special.erf: "erf",
    torch.special.log1p: "log1p", torch.expm1: "expm1", torch.special.expm1: "expm1", torch.exp2: "exp2",
    torch.special.exp2: "exp2", torch.log2: "log2", torch.log10: "log10",
    torch.erfc: "erfc", torch.special.erfc: "erfc", torch.atan: "atan", torch.arctan: "atan",
    torch.asin: "asin", torch.arcsin: "asin", torch.acos: "acos", torch.arccos: "acos",
    torch.asinh: "asinh", torch.arcsinh: "asinh", torch.acosh: "acosh", torch.arccosh: "acosh",
    torch.atanh: "atanh", torch.arctanh: "atanh", torch.special.ndtr: "ndtr",
    torch.sin: "sin", torch.cos: "cos", torch.tan: "tan", torch.sinh: "sinh", torch.cosh: "cosh",
    torch.floor: "floor", torch.ceil: "ceil", torch.trunc: "trunc", torch.fix: "trunc",
    torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", torch.neg: "neg",
    torch.negative: "neg", torch.absolute: "abs",
    torch.frac: "frac",
    operator.neg: "neg", F.sigmoid: "sigmoid", F.tanh: "tanh", torch.special.expit: "sigmoid",
}
POINTWISE_FUNCTIONS = {
    **{fn: (_unary, op, {}) for fn, op in _TORCH_UNARY.items()},
    F.relu: (_act, "relu", {}),
    F.leaky_relu: (_leaky_relu, "leaky_relu", {"negative_slope": "negative_slope"}),
    F.gelu: (_gelu, "gelu", {"approximate": "approximate"}),
    F.silu: (_act, "silu", {}),
    F.mish: (_act, "mish", {}),
    F.softplus: (_softplus, "softplus", {"beta": "beta", "threshold": "threshold"}),
    F.hardtanh: (_hardtanh, "hardtanh", {"min_val": "min_val", "max_val": "max_val"}),
    F.hardsigmoid: (_act, "hardsigmoid", {}),
    F.hardswish: (_act, "hardswish", {}),
    F.elu: (_elu, "elu", {"alpha": "alpha"}),
    F.selu: (_act, "selu", {}),
    torch.selu: (_unary, "selu", {}),   # (torch's names of F.selu and F.celu, F.threshold below)
    torch.clamp: (_clamp, "clamp", {"min": "min", "max": "max"}),
    torch.clip: (_clamp, "clamp", {"min": "min", "max": "max"}),
    torch.clamp_min: (_clamp_min, "clamp", {"min": "min"}),
    torch.clamp_max: (_clamp_max, "clamp", {"max": "max"}),
    torch.logit: (_logit, "logit", {"eps": "eps"}),
    torch.special.logit: (_logit, "logit", {"eps": "eps"}),
}
# Composite activations as functions: callable -> (signature, Tracer.composite's name).
COMPOSITE_FUNCTIONS = {
    F.logsigmoid: (_unary, "logsigmoid"), F.softsign: (_unary, "softsign"),
    F.tanhshrink: (_unary, "tanhshrink"), F.threshold: (_threshold, "threshold"),
    F.hardshrink: (_shrink, "hardshrink"), F.softshrink: (_shrink, "softshrink"),
    F.celu: (_celu, "celu"), torch.reciprocal: (_unary, "reciprocal"), torch.sign: (_unary, "sign"),
    torch.sgn: (_unary, "sign"), torch.celu: (_celu, "celu"), torch.threshold: (_threshold, "threshold"),
}
# torch.lerp(start, end, weight) (Tracer.lerp).
LERP_FUNCTIONS = (torch.lerp,)
BINARY_FUNCTIONS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    torch.add: "add", torch.sub: "sub", torch.mul: "mul", torch.div: "div",
    torch.subtract: "sub", torch.multiply: "mul", torch.divide: "div", torch.true_divide: "div",
    operator.iadd: "add", operator.isub: "sub", operator.imul: "mul", operator.itruediv: "div",
}
POW_FUNCTIONS = (operator.pow, torch.pow)
# Python's arithmetic of two plain numbers (c // k of sizes): evaluated at trace time.
PYTHON_ARITHMETIC = frozenset({operator.floordiv, operator.mod, operator.add, operator.sub, operator.mul,
                               operator.truediv, operator.pow, operator.neg})
# Python's own functions of numbers (math.sqrt(x.size(-1))): evaluated at trace time.
NUMBER_FUNCTIONS = frozenset({math.sqrt, math.log, math.log2, math.log10, math.exp, math.pow, math.floor,
                              math.ceil, math.fabs, math.isqrt, abs, float, int, round, min, max})
# The remainder and the floored quotient of a division by a number: function -> op (x % c is
# torch.remainder, x // c torch.floor_divide).
BY_NUMBER_FUNCTIONS = {torch.fmod: "fmod", torch.remainder: "remainder", operator.mod: "remainder",
                       operator.imod: "remainder", torch.floor_divide: "floor_divide",
                       operator.floordiv: "floor_divide", operator.ifloordiv: "floor_divide"}
REDUCE_FUNCTIONS = {torch.sum: "sum", torch.mean: "mean", torch.amax: "max", torch.amin: "min",
                    torch.logsumexp: "logsumexp", torch.special.logsumexp: "logsumexp"}
SOFTMAX_FUNCTIONS = {F.softmax: "softmax", torch.softmax: "softmax", torch.special.softmax: "softmax",
                     F.log_softmax: "log_softmax", torch.log_softmax: "log_softmax",
                     torch.special.log_softmax: "log_softmax"}
# Row statistics written out with a row mean and sums (Tracer.variance, Tracer.norm): function
# -> (signature, what).
STATISTIC_FUNCTIONS = {torch.var: (_var, "var"), torch.std: (_var, "std"),
                       torch.var_mean: (_var, "var_mean"), torch.std_mean: (_var, "std_mean"),
                       torch.norm: (_norm, "norm"), torch.linalg.vector_norm: (_vector_norm, "norm"),
                       torch.linalg.norm: (_vector_norm, "norm")}
STATISTIC_METHODS = {"var": torch.var, "std": torch.std, "norm": torch.norm}
MATMUL_FUNCTIONS = (torch.matmul, operator.matmul, torch.mm)


def einsum_form(equation: str) -> str | None:
    """Which of kgen's einsum forms `equation` is: "gemm_nk" ('bk,nk->bn': x Wᵀ, W stored (N,
    K)), "gemm_kn" ('bk,kn->bn': W stored (K, N)), "mul" ('bn,n->bn': a per-feature product), or
    None (any other: the frontend refuses it). The letters are free, and the batch may be '...'
    in the first operand and the output ('...k,nk->...n')."""
    lhs, _, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != 2:
        return None
    a, b = terms
    if a.startswith("...") and out.startswith("...") and "." not in a[3:] + b + out[3:]:
        # '...k,nk->...n' (a Linear over the last dimension, as HF and research code write it):
        # kgen traces the input's rows, (batch, K), so the leading dimensions are one, the batch.
        free = next(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation)
        a, out = free + a[3:], free + out[3:]
    if len(a) == len(b) == len(out) == 2 and len(set(a + b)) == 3:
        if a[1] == b[1] and out == a[0] + b[0]:
            return "gemm_nk"
        if a[1] == b[0] and out == a[0] + b[1]:
            return "gemm_kn"
    if len(a) == len(out) == 2 and b == a[1] and out == a:
        return "mul"
    return None
# Element-wise min / max of two tensors (NaN propagating): function -> op.
EXTREMUM_FUNCTIONS = {torch.minimum: "minimum", torch.maximum: "maximum", torch.fmax: "fmax", torch.fmin: "fmin"}
# Point-wise ops of two tensors that torch takes no number for: function (and method) -> op.
TENSOR_PAIR_FUNCTIONS = {torch.logaddexp: "logaddexp"}
# 1-d pooling over the features of x.unsqueeze(1): function -> (signature, op).
POOL_FUNCTIONS = {F.max_pool1d: (_max_pool1d, "max"), torch.max_pool1d: (_max_pool1d, "max"),
                  F.avg_pool1d: (_avg_pool1d, "avg")}
# Adaptive 1-d pooling to an output size that divides the features: the pooling above of kernel and
# stride features // output size (F.adaptive_avg_pool1d is torch.adaptive_avg_pool1d).
ADAPTIVE_POOL_FUNCTIONS = {torch.adaptive_avg_pool1d: "avg", F.adaptive_max_pool1d: "max"}
# Comparisons (a where's condition only: Tracer.where_op): function -> ops.COMPARISONS' name.
COMPARISON_FUNCTIONS = {
    operator.gt: "gt", operator.ge: "ge", operator.lt: "lt", operator.le: "le", operator.eq: "eq",
    operator.ne: "ne", torch.gt: "gt", torch.ge: "ge", torch.lt: "lt", torch.le: "le", torch.eq: "eq",
    torch.ne: "ne", torch.greater: "gt", torch.greater_equal: "ge", torch.less: "lt",
    torch.less_equal: "le", torch.not_equal: "ne",
}
# torch.isnan / isinf / isfinite (and their methods): the comparisons they are, of v and a number or
# |v| (Tracer.float_class): NaN != NaN; |v| == inf; |v| < inf (False for NaN and the infinities).
FLOAT_CLASS_FUNCTIONS = {torch.isnan: "isnan", torch.isinf: "isinf", torch.isfinite: "isfinite"}
# Logical combinations of comparisons (Tracer.logical): function / method -> op.
LOGICAL_FUNCTIONS = {operator.and_: "and", operator.or_: "or", operator.xor: "xor", operator.invert: "not",
                     torch.logical_and: "and", torch.logical_or: "or", torch.logical_xor: "xor",
                     torch.logical_not: "not", torch.bitwise_not: "not"}
LOGICAL_METHODS = {"__and__": "and", "__or__": "or", "__xor__": "xor", "__invert__": "not",
                   "logical_and": "and", "logical_or": "or", "logical_xor": "xor", "logical_not": "not",
                   "bitwise_not": "not"}
COMPARISON_METHODS = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le,
                      "eq": operator.eq, "ne": operator.ne, "greater": operator.gt, "greater_equal": operator.ge,
                      "less": operator.lt, "less_equal": operator.le, "not_equal": operator.ne,
                      "__gt__": operator.gt, "__ge__": operator.ge, "__lt__": operator.lt, "__le__": operator.le}
# torch.zeros_like(v) and its kin: a constant of v's shape (Tracer.fill_like).
FILL_FUNCTIONS = {torch.zeros_like: (_fill_like, 0.0), torch.ones_like: (_fill_like, 1.0),
                  torch.full_like: (_full_like, None)}
IDENTITY_METHODS = ("clone", "contiguous")
# Methods that turn a (M, 1) row value into (M,) (Tracer._flatten_row).
ROW_FLATTEN_METHODS = ("squeeze", "flatten")   # (view and reshape: Tracer._view)
# Tensor methods that give no tensor: never a computed weight (Tracer._computes_a_weight)
NOT_TENSOR_METHODS = frozenset({"size", "dim", "numel", "nelement", "item", "tolist", "stride",
                                "is_contiguous", "data_ptr", "element_size", "type", "get_device"})
# Methods that give a weight's own values: W.contiguous() is W, as before weights were computed
WEIGHT_ITSELF_METHODS = frozenset({*IDENTITY_METHODS, "detach"})
DROPOUT_OPS = (F.dropout, torch.dropout, torch.nn.functional.alpha_dropout)


def _weight_globals(body: list[str], names: dict, refuse) -> list[str]:
    """Lines defining the names torch.fx's code of a computed weight reads from its globals
    (`inf` and `nan` for float('inf') and float('nan'), a dtype, a device): the emitted method has
    torch alone. Any other global is refused."""
    used = set(re.findall(r"\b[A-Za-z_]\w*\b", "\n".join(body)))
    lines = []
    for name, value in sorted(names.items()):
        if name not in used or name in ("torch", "self") or name.startswith("_"):
            continue
        if isinstance(value, float):
            lines.append(f"{name} = float({repr(value)!r})")
        elif isinstance(value, torch.dtype):
            lines.append(f"{name} = {value}")
        elif isinstance(value, torch.device):
            lines.append(f"{name} = torch.device({str(value)!r})")
        elif not callable(value) or getattr(value, "__module__", "").split(".")[0] != "torch":
            raise refuse(f"a GEMM weight whose computation reads {name} = {value!r}")
    return lines


@dataclasses.dataclass(frozen=True, eq=False)
class WeightExpr:
    """A GEMM weight the forward computes from the module's parameters (Tracer._weight_expression):
    the body of a method of `self` that returns it (N, K) and contiguous, a name for messages,
    and its value at the trace."""
    body: tuple
    name: str
    value: torch.Tensor


# Reductions over every element (dim=None) kgen takes as the module's last op: the kernel's
# per-row values, then torch's method of that name over them (Tracer._whole_reduction).
WHOLE_REDUCTIONS = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}
# In-place methods: the out-of-place method they are (Tracer.run rebinds the receiver).
INPLACE_METHODS = {f"{name}_": name for name in (
    "mul", "add", "sub", "div", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs",
    "neg", "clamp", "clamp_min", "clamp_max", "clip", "pow", "subtract", "multiply", "divide",
    "true_divide", "log1p", "erf", "reciprocal", "addcmul", "addcdiv", "masked_fill", "expm1", "exp2", "log2", "log10",
    "sign", "sgn", "lerp", "square", "nan_to_num", "erfc", "atan", "arctan", "floor", "ceil", "round", "trunc", "fix",
    "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "arcsin", "arccos", "frac", "logit")}
# (asinh_, acosh_ and atanh_ are not taken: torch has no derivative for them in place.)
INPLACE_METHODS.update({"__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div",
                        "fmod_": "fmod", "remainder_": "remainder", "__imod__": "remainder",
                        "floor_divide_": "floor_divide", "__ifloordiv__": "floor_divide",
                        # (detach_: the tensor itself detached, not its views: Tracer._write)
                        "detach_": "detach"})
# In-place functions (x += y is operator.iadd in fx): function -> the out-of-place one.
INPLACE_FUNCTIONS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imod: operator.mod,
                     operator.ifloordiv: operator.floordiv,
                     operator.imul: operator.mul, operator.itruediv: operator.truediv,
                     torch.relu_: torch.relu, F.relu_: F.relu, torch.sigmoid_: torch.sigmoid,
                     torch.tanh_: torch.tanh, torch.exp_: torch.exp, torch.clamp_: torch.clamp,
                     torch.clip_: torch.clip, torch.clamp_min_: torch.clamp_min,
                     torch.clamp_max_: torch.clamp_max, F.hardtanh_: F.hardtanh, F.elu_: F.elu,
                     F.leaky_relu_: F.leaky_relu, F.threshold_: F.threshold, F.celu_: F.celu, F.rrelu_: F.rrelu,
                     torch.selu_: torch.selu,
                     torch.reciprocal_: torch.reciprocal}
# Views of a parameter, read as the parameter in another shape (Tracer.param_view).
PARAM_VIEWS = ("view", "reshape", "unsqueeze", "squeeze", "flatten", "t", "transpose", "permute")
# Copies along dimensions of size 1 (Tracer._broadcast), and constants made from a value.
BROADCAST_METHODS = ("expand", "expand_as", "broadcast_to", "repeat")
# Random numbers and tensors of unset values drawn in forward (timm's drop_path in training mode:
# x.new_empty(shape).bernoulli_(keep)): refused by what they are, not as unknown ops.
_RANDOM = ("draws random numbers in the forward (a per-sample mask such as drop_path's in training mode, "
           "noise); kgen reproduces Dropout's masks only")
_UNSET = ("makes a tensor of unset values, to be filled in place (drop_path's random mask in training mode "
          "is filled by bernoulli_); kgen reproduces Dropout's masks only")
RANDOM_METHODS = {**dict.fromkeys(("bernoulli", "bernoulli_", "uniform_", "normal_", "random_", "exponential_",
                                   "geometric_", "cauchy_", "log_normal_"), _RANDOM), "new_empty": _UNSET}
RANDOM_FUNCTIONS = {**dict.fromkeys((torch.rand, torch.randn, torch.rand_like, torch.randn_like, torch.randint,
                                     torch.randint_like, torch.bernoulli, torch.normal, torch.multinomial,
                                     torch.randperm, torch.poisson), _RANDOM),
                    **dict.fromkeys((torch.empty, torch.empty_like), _UNSET)}
NEW_TENSOR_METHODS = ("new_zeros", "new_ones", "new_full", "new_tensor")
# Methods and functions whose result shares its input's storage (a view of the same elements, or
# the tensor itself): an in-place op on either changes both (Tracer._aliasing, _write).
VIEW_METHODS = frozenset({"contiguous", "detach", "unsqueeze", "squeeze", "view", "reshape", "flatten", "view_as",
                          "reshape_as", "expand", "expand_as", "broadcast_to", "__getitem__"})
VIEW_FUNCTIONS = frozenset({torch.flatten, torch.reshape, torch.squeeze, torch.unsqueeze, torch.detach,
                            torch.broadcast_to, operator.getitem})
# Conversions that return the tensor itself where it already has the dtype (x.float() of a float32
# tensor) and a copy otherwise: whether an in-place op through one reaches the other side depends
# on the module's dtype (Tracer._write refuses where that would change a value read later).
DTYPE_ALIAS_METHODS = frozenset({"float", "double", "half", "bfloat16", "to", "type", "type_as"})
# Point-wise ops that take a Python bool beside a tensor as the int 1 / 0, as torch promotes it
# (y * True); torch's sub refuses one (Tracer.pointwise).
BOOL_OPERAND_OPS = ("add", "mul", "div")
# Functions with an `inplace` flag (True: the result is written into the input).
_INPLACE_FLAG = {F.relu: _act, F.leaky_relu: _leaky_relu, F.hardtanh: _hardtanh, F.elu: _elu,
                 F.silu: _act, F.mish: _act, F.hardsigmoid: _act, F.hardswish: _act, F.selu: _act,
                 F.relu6: _act, F.dropout: _dropout, F.threshold: _threshold, F.celu: _celu, F.rrelu: _rrelu}
METHOD_UNARY = ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "log1p", "erf", "frac",
                "expm1", "exp2", "log2", "log10", "erfc", "atan", "floor", "ceil", "round", "trunc",
                "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "asinh", "acosh", "atanh")
# Other names of those methods.
METHOD_ALIASES = {"negative": "neg", "absolute": "abs",
                  "arctan": "atan", "fix": "trunc", "arcsin": "asin", "arccos": "acos", "arcsinh": "asinh",
                  "arccosh": "acosh", "arctanh": "atanh"}
METHOD_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "__add__": "add",
                 "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "subtract": "sub",
                 "multiply": "mul", "divide": "div", "true_divide": "div"}
METHOD_REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "logsumexp": "logsumexp"}

# What kgen takes, one entry per kind of op: `kgen ops` prints them; a refusal names the command.
SUPPORTED = (
    ("GEMMs", "nn.Linear, F.linear, x @ W.T, torch.matmul / torch.mm / x.mm(W.T), torch.addmm(b, x, W.T) "
     "and torch.einsum('bk,nk->bn', x, W) with W stored (N, K), or x @ W / torch.mm / torch.addmm(b, x, W) / "
     "einsum('bk,kn->bn') with W stored (K, N), or the product transposed back, (W @ x.T).T; the first on the module's input (or on the input scaled by "
     "a number: self.fc(x * 2), self.fc(x / self.t), or on row-wise and point-wise ops of it, a prologue: "
     "self.fc(self.ln(x)), an RMSNorm, self.fc(F.gelu(x)), self.fc(self.dropout(x))), each later one on the (batch, features) "
     "output of the part before it; a weight computed from the module's parameters"),
    ("point-wise", f"{', '.join(n for n in sorted(ops.POINTWISE) if hasattr(torch, n) or hasattr(F, n))} (as modules, functions or methods, with scalars, "
     "per-feature (N,) or (1, N) parameters, per-row values, and parameters of other shapes that "
     "broadcast onto the result as torch broadcasts them); the activations torch defines from those "
     "(logsigmoid, softsign, tanhshrink, threshold, hardshrink, softshrink, celu, reciprocal, sign, "
     "lerp, nan_to_num); masked_fill, addcmul, addcdiv; in-place forms (x.mul_(2), x += y, inplace=True)"),
    ("conditions", "torch.where(cond, a, b) and a.where(cond, b) with a comparison (>, >=, <, <=, ==, !=) "
     "of values, constants and parameters, or torch.isnan / isinf / isfinite, as cond, combined with &, |, "
     "^, ~; a comparison made a number ((x > 0).float()); y[cond] = v after the GEMM (v a number or an "
     "element-wise expression of y[cond])"),
    ("row reductions over dim 1", "sum, mean, max, min, amax, amin, logsumexp, softmax, log_softmax, "
     "softmin, var, std, var_mean, std_mean, norm (p = 1, 2, inf); a reduction of every element as the "
     "last op"),
    ("normalizations", "BatchNorm1d (one; the module or F.batch_norm on its tensors); GroupNorm, LayerNorm, "
     "RMSNorm, F.normalize over the features"),
    ("pooling", "MaxPool1d / AvgPool1d over the features (of x.unsqueeze(1), squeezed back); "
                "AdaptiveMaxPool1d / AdaptiveAvgPool1d to an output size dividing the features"),
    ("halves (GLU)", "the two halves of a (batch, features) value over its features, of an even width N: "
     "chunk(2, dim=-1), split(N // 2, dim=-1), narrow(-1, 0 or N // 2, N // 2), h[:, :N // 2] / "
     "h[..., N // 2:], F.glu / nn.GLU (a * sigmoid(b)); each half a (batch, N / 2) value, as a pooled one "
     "(SwiGLU silu(a) * b, GEGLU gelu(b) * a, then point-wise ops, row reductions, a softmax, RMSNorm, "
     "F.normalize, a second Linear); not with a pooling in the same part"),
    ("views", "order-keeping views of parameters (view, reshape, unsqueeze, squeeze, t of an (N, 1) one); "
     "clone/detach, flatten(1) of a (batch, features) value; views of a value to its own shape "
     "(x.view(x.size(0), -1), x.reshape(-1, N)) and between (batch, 1) and (batch,) (unsqueeze(1), "
     "view(-1), x[:, None]); expand / expand_as / repeat of a value over dimensions of size 1"),
    ("other operands", "the module's input read again after the GEMM (a residual such as x + x_in, "
     "broadcast as torch broadcasts it); get_inputs()' tensors after the input, (batch, d) in its dtype, "
     "read after the GEMM (forward(self, x, residual): LayerNorm(fc(x) + residual), fc(x) * gate); "
     "torch.zeros_like / ones_like / full_like (x.new_zeros / new_ones / new_full) of a value as an "
     "operand of a point-wise op"),
    ("Dropout", "the identity in eval mode; in training mode torch's own mask, drawn by the forward, "
     "for a dropout of a (batch, features) value"),
)


class _Id(int):
    """An IR node id as an fx value. A subclass of int, so that an fx argument that is a Python
    int (a constant, a dim) is never taken for a node: `x * 2` once read node 2 for the 2."""

    __slots__ = ()


def _is_number(v) -> bool:
    """Whether an fx argument is a Python number (not a bool, not a node: _Id is an int)."""
    return isinstance(v, (int, float)) and not isinstance(v, (bool, _Id))


class _TensorNumber(float):
    """The number a one-element tensor made in forward holds (torch.tensor(0.5)): a constant
    like any Python float, except where torch tells a tensor from a number
    (torch.min(x, torch.tensor(0.5)) is an element-wise minimum, torch.min(x, 1) a reduction)."""

    __slots__ = ()


class _BeforeTheGemm(Unsupported):
    """A parameter's or the input's value used before the first GEMM (Tracer.value): Tracer.run
    defers the op; where the GEMM itself needs it, the refusal it carries."""


EXTRA_INPUT_BEFORE_THE_GEMM = ("an op on an input after the first (get_inputs()' second tensor on) whose result the "
                               "GEMM reads: kgen reads such an input after the GEMM only (a residual, a gate)")
INPUT_BEFORE_THE_GEMM = ("an op on the module's input before the GEMM, whose result the GEMM reads (kgen's GEMM "
                         "comes first; the input may be read again after it)")


# Ops that scale the module's input by a number before the first GEMM (`self.fc(x * 2)`,
# `self.fc(x / self.temperature)`, `self.fc(-x)`): the GEMM is linear in x, so the GEMM of x is
# taken and its z scaled before the bias (Tracer._input_scaling). Functions and methods by target.
INPUT_SCALING_FUNCTIONS = {operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
                           torch.true_divide: "div", operator.neg: "neg", torch.neg: "neg"}
INPUT_SCALING_METHODS = {"mul": "mul", "div": "div", "true_divide": "div", "neg": "neg"}


class _Deferred:
    """An op on parameters or the module's input alone that forward makes before the first GEMM,
    with its fx arguments: taken where its value is first used (Tracer._materialized): a residual
    written first (`0.5 * x + torch.tanh(self.fc(x))`) is the one written after."""

    def __init__(self, fx_node, args, kwargs):
        self.fx_node, self.args, self.kwargs = fx_node, args, kwargs


class _Marker:
    """An fx value that is not an IR node: a weight matrix, its transpose, the (values,
    indices) pair of torch.max(dim=...), a (batch, 1, features) view of a value
    ("unsqueezed": the input form of 1-d pooling), or the module's input ("input", payload
    whether it was detached: clone, contiguous and detach of it are the input itself), a
    comparison ("comparison", (op, lhs id, rhs id): a torch.where's condition, no value of its
    own), a constant of a value's shape ("filled", (value, the value's id): zeros_like) or a value
    broadcast to a larger shape ("broadcast", (the value, the shape): p.expand(x.size(0), -1),
    p.expand_as(x), p.repeat(x.size(0), 1)), which is the value itself as an operand of a
    point-wise op whose result has that shape anyway."""

    def __init__(self, kind: str, payload, shape: tuple | None = None):
        self.kind, self.payload = kind, payload
        # A parameter's marker ("tensor", "matrix"): the shape of the view of it the module
        # reads (Tracer.param_view), None for the parameter itself.
        self.shape = shape

    def __repr__(self) -> str:
        # (where a refusal shows an argument it did not expect)
        return "a value's shape" if self.kind == "shape" else f"<{self.kind}>"


def _names_a_device(v) -> bool:
    """Whether an argument of x.to(...) / x.cuda(...) names a device: x.device (a marker), a
    torch.device, a device's name ("cuda", "cuda:0", "cpu": Tracer.visit_method takes the host only
    for the module's input)."""
    if isinstance(v, _Marker):
        return v.kind == "device"
    if isinstance(v, str):
        return re.fullmatch(r"(cuda|cpu)(:\d+)?", v) is not None
    return isinstance(v, torch.device)


# What a forward may ask of the process it runs in and branch on, which one emitted forward cannot
# follow: name -> (the object holding the function, its attribute, the answer the trace gives the
# reference, the other answer). The emitted file runs on a GPU, with gradients as its caller
# chooses, eagerly or compiled: where the ops the forward traces to differ with the other answer,
# the module is refused (_trace); torch.cuda.is_available() has one answer where the file runs.
ENVIRONMENT_QUERIES = {
    "torch.is_grad_enabled()": (torch, "is_grad_enabled", True, False),
    "torch.is_inference_mode_enabled()": (torch, "is_inference_mode_enabled", False, True),
    "torch.cuda.is_available()": (torch.cuda, "is_available", True, True),
    "torch.compiler.is_compiling()": (torch.compiler, "is_compiling", False, True),
    "torch.jit.is_scripting()": (torch.jit, "is_scripting", False, True),
    "torch.jit.is_tracing()": (torch.jit, "is_tracing", False, True),
    "torch.are_deterministic_algorithms_enabled()": (torch, "are_deterministic_algorithms_enabled", False, True),
}


# Seeding torch's generator in forward: the module's masks then differ from the file's (refused).
SEEDING = ((torch, "manual_seed"), (torch.random, "manual_seed"), (torch.cuda, "manual_seed"),
           (torch.cuda, "manual_seed_all"), (torch, "seed"))


class _TensorState(tuple):
    """A tensor attribute's identity and version counter (_module_state)."""


_ABSENT = object()


def _module_state(model: nn.Module) -> dict:
    """What of the model's own attributes a forward could change without torch.fx seeing it:
    (module path, name) -> a plain value's copy (numbers, strings, and tuples, lists and dicts of
    them), a tensor attribute's identity and version (_TensorState: an in-place write moves the
    version, on the meta device too), or any other object's identity. Parameters, buffers and
    submodules are nn.Module's own entries, not among them."""
    def plain(v, depth=0):
        if v is None or isinstance(v, (bool, int, float, str, complex)):
            return v
        if depth < 4 and isinstance(v, (tuple, list)):
            return (type(v).__name__, tuple(plain(e, depth + 1) for e in v))
        if depth < 4 and isinstance(v, dict):
            return ("dict", tuple((repr(k), plain(e, depth + 1)) for k, e in v.items()))
        if isinstance(v, torch.Tensor):
            return _TensorState((id(v), v._version))
        return ("object", id(v))

    state = {}
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if name not in _MODULE_INTERNALS:
                state[(path, name)] = plain(value)
    return state


def _names_the_cpu(v) -> bool:
    return (isinstance(v, str) and v == "cpu") or (isinstance(v, torch.device) and v.type == "cpu")


class _Proxy(torch.fx.Proxy):
    """fx's Proxy, which numpy leaves alone: `np.sqrt(2.0) * x` goes to the Proxy's own reflected
    operator (a numpy number on the left otherwise asks the Proxy for an array and fails)."""

    __array_ufunc__ = None

    def __getattr__(self, k: str) -> "_Attribute":
        return _Attribute(self, k)


class _Attribute(torch.fx.proxy.Attribute, _Proxy):
    """fx's attribute of a traced value (y.T, y.shape), whose node fx makes only where the value is
    used, not where it is read (its method calls, y.relu(), make none): `with torch.no_grad(): yt =
    y.T` then `W @ yt` made it outside the block, so it carried no NO_GRAD mark and its gradient
    flowed where torch's does not. The mark is the read's."""

    def __init__(self, root, attr: str):
        super().__init__(root, attr)
        self.grad_off = _grad_off()

    def __getattr__(self, k: str) -> "_Attribute":
        return _Attribute(self, k)

    @property
    def node(self) -> torch.fx.Node:
        if self._node is None and self.grad_off:
            super().node.meta[NO_GRAD] = True
        return super().node


def _grad_off() -> bool:
    """Whether an op made now is made with gradients off (torch.no_grad(), inference_mode)."""
    return not torch.is_grad_enabled() or torch.is_inference_mode_enabled()


class _InputProxy(_Proxy):
    """The module's input while torch.fx traces the forward: its number of dimensions is a
    number (get_inputs() fixes it), so that `if x.dim() > 2:` / `x.ndim` take their branch at
    trace time instead of failing as control flow on a traced value. Its sizes stay symbolic
    (x.size(0) is the batch, which the file does not fix)."""

    rank = 2
    # The input's sizes past the batch (the weight fixes them): numbers, so that
    # `assert x.shape[1] == self.fc.in_features` and `if x.size(-1) != ...: raise` take their
    # branch too; the batch stays symbolic.
    features: tuple = ()
    # How many leading sizes are symbolic: the batch; or, where an input of more dimensions is
    # traced with its leading sizes (Tracer.leads), each of them (x.size(0), x.size(1), ...).
    leads = 1

    def _lead_size(self, i: int):
        return self.tracer.create_proxy("call_method", "size", (self, i), {})

    def size(self, dim=None):
        if dim is None:
            return _InputShape(self)
        return _InputShape(self)[dim]

    @property
    def shape(self):
        return _InputShape(self)

    @property
    def ndim(self) -> int:
        return self.rank

    def dim(self) -> int:
        return self.rank

    def ndimension(self) -> int:
        return self.rank


class _InputShape(tuple):
    """x.shape / x.size() of the module's input while fx traces: (the batch, symbolic, then the
    input's other sizes as numbers). Indexing, unpacking and len() work as on torch.Size."""

    def __new__(cls, proxy: _InputProxy):
        return super().__new__(cls, (*(proxy._lead_size(i) for i in range(proxy.leads)), *proxy.features))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        return tuple.__getitem__(self, i)


def _frame(fx_node: torch.fx.Node) -> tuple[int, str] | None:
    """(line, text) of the reference file where fx made the node (_LocatingTracer's stack_trace)."""
    m = re.search(r'File "([^"]*)", line (\d+), in \w+\n\s*(.*)', fx_node.stack_trace or "")
    return (int(m.group(2)), m.group(3).strip()) if m else None


def _torch_kind(module: nn.Module) -> type:
    """The torch.nn class a module computes as: its own, or, for a subclass of one that keeps
    its forward, that class: an nn.Linear under a parametrization (weight_norm, spectral_norm:
    torch makes its class ParametrizedLinear, whose weight is computed on each access) is a
    Linear reading that weight."""
    kind = type(module)
    if kind.__module__.startswith("torch.nn.modules."):
        return kind
    for base in kind.__mro__[1:]:
        if base is nn.Module:
            break
        if base.__module__.startswith("torch.nn.modules.") and kind.forward is base.forward:
            return base
    return kind


def _class_source(m: nn.Module, reference_module: str) -> str | None:
    """m's class (before torch.nn.utils.parametrize's) as an emitted file names it: nn.X for torch's
    own (torch.nn as nn), _kgen_reference.X for one the reference file defines (the file's private copy of
    the reference makes its modules of those), None for another (defined in a function, imported
    from elsewhere)."""
    from torch.nn.utils.parametrize import type_before_parametrizations

    cls = type_before_parametrizations(m)
    if getattr(nn, cls.__name__, None) is cls:
        return f"nn.{cls.__name__}"
    if cls.__module__ == reference_module and all(part.isidentifier() for part in cls.__qualname__.split(".")):
        return f"_kgen_reference.{cls.__qualname__}"
    return None


class _LocatingTracer(torch.fx.Tracer):
    """torch.fx's Tracer, each node's stack_trace the outermost line of the reference file on the
    stack when fx made it, as fx's own `record_stack_traces` writes a frame (`File "...", line N,
    in f` and the line): where kgen's messages and the IR say an op came from (Tracer._locate).
    Why not record_stack_traces: its symbolized tracebacks import torch._inductor and with it
    torch._dynamo the first time, 0.8 s of a 2-core machine's `kgen generate` and several
    seconds of every fresh process on the GPU host (docs/perf.md, session 10)."""

    def __init__(self, filename: str, source: str, input_shape: tuple, leads: int = 1):
        super().__init__()
        self.filename = filename
        self.lines = source.splitlines()
        self.input_shape = input_shape
        self.leads = leads   # the input's leading sizes kept symbolic (_InputProxy.leads)
        self.placeholders = 0
        # Every submodule the forward calls (fx's leaves and the modules it traces through), by
        # path, in call order, with its class as the emitted file names it: ModelNew calls none
        # of them (Graph.called_modules).
        self.called_modules: list[tuple[str, str | None]] = []
        self.autocast_off: list[tuple[int | None, str]] = []   # (line, text) of each autocast(enabled=False) entered
        self.autocast_off_depth = 0   # how many of them are open while fx makes a node

    def call_module(self, m, forward, args, kwargs):
        try:
            path = self.path_of_module(m)
        except NameError:
            if not self._state_installed(m):
                raise   # its own parameters or buffers, which the model does not hold: refused
            # A module that is no submodule of the model but holds no state of its own: made in
            # forward and called at once (nn.GELU()(x), nn.Softmax(dim=1)(y)), a slice of an
            # nn.Sequential (self.net[1:](x), whose layers are the model's), or kept in a plain
            # list. It computes what its forward does, as torch runs it: traced through, its
            # layers (the model's own) called as they are. (A module made in forward is in
            # training mode whatever the model's: an nn.Dropout() there drops in eval too, as the
            # dropout it traces to says.)
            return forward(*args, **kwargs)
        if path and all(path != p for p, _ in self.called_modules):
            self.called_modules.append((path, _class_source(m, type(self.root).__module__)))
        return super().call_module(m, forward, args, kwargs)

    def _state_installed(self, m: nn.Module) -> bool:
        """Whether every parameter and buffer `m` reaches is held by a submodule of the model."""
        for sub in m.modules():
            if next(sub.parameters(recurse=False), None) is None and next(sub.buffers(recurse=False), None) is None:
                continue
            try:
                self.path_of_module(sub)
            except NameError:
                return False
        return True

    def proxy(self, node):
        if node.op != "placeholder":
            return _Proxy(node, self)
        self.placeholders += 1
        if self.placeholders > 1:   # (a parameter left at its default: Tracer._forward_defaults)
            return _Proxy(node, self)
        p = _InputProxy(node, self)
        p.rank = len(self.input_shape)
        p.leads = self.leads
        p.features = tuple(self.input_shape[self.leads:])
        return p

    def create_arg(self, a):
        # a numpy number (np.float32(0.5), np.sqrt(2 / np.pi)) is the Python number it holds
        return super().create_arg(a.item() if isinstance(a, numpy.generic) else a)

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        outer = inner = None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                outer = frame
                inner = inner or frame
            frame = frame.f_back
        if outer is not None and not node.stack_trace:
            n = outer.f_lineno
            node.stack_trace = f'File "{self.filename}", line {n}, in {outer.f_code.co_name}\n    {self.text(n)}'
        if inner is not None and _augmented_assignment(inner.f_code, inner.f_lasti):
            node.meta[AUGMENTED] = True
        if self.autocast_off_depth:
            node.meta[autocast.AUTOCAST_OFF] = True
        if node.op.startswith("call_") and _grad_off():
            # an op (not a parameter's read: self.w under no_grad is still the parameter) made
            # with gradients off; the trace runs with them on (Tracer.run)
            node.meta[NO_GRAD] = True
        return node

    def text(self, line: int | None) -> str:
        """The reference file's source line (stripped; empty where there is none)."""
        return self.lines[line - 1].strip() if line and 0 < line <= len(self.lines) else ""

    def _refusal(self, what: str) -> Unsupported:
        """Unsupported at the reference file's innermost line on the stack now."""
        line = next((f.f_lineno for f in _frames(sys._getframe(2)) if f.f_code.co_filename == self.filename), None)
        if line is None:   # (a decorator on forward: torch's wrapper runs before forward's first line)
            return Unsupported(f"{self.filename}: forward's decorator: {what}")
        return Unsupported(f"{self.filename}: line {line}: `{self.text(line)}`: {what}")

    @contextlib.contextmanager
    def unbound_methods_traced(self):
        """While fx traces, torch.Tensor's methods called unbound on a traced value
        (torch.Tensor.relu(x), torch.Tensor.mul(x, 2.0)) are the bound call x.relu() / x.mul(2.0):
        the C methods torch.Tensor inherits from its base class take no fx Proxy (a TypeError,
        "descriptor 'mul' ... doesn't apply to a 'Proxy' object"), though they mean the method.
        Each is shadowed on torch.Tensor by one that calls the Proxy's method (the same node
        x.mul(2.0) makes) and the C method for anything else; removed after. Only the names the
        reference file's text holds (shadowing all 700 costs 9 ms a trace; a helper module's
        unbound call elsewhere stays fx's refusal)."""
        base = torch._C.TensorBase
        words = set(re.findall(r"\w+", "\n".join(self.lines)))
        # (and the operators' dunders that fx's Proxy has, torch.Tensor.__mul__(x, y): its x * y)
        names = [n for n, v in vars(base).items() if n in words and (not n.startswith("_") or (
                 n.startswith("__") and n.endswith("__") and n in vars(torch.fx.Proxy) and n != "__bool__"))
                 and n not in vars(torch.Tensor) and type(v).__name__ == "method_descriptor"]

        def unbound(name, real):
            def method(self, *args, **kwargs):
                if isinstance(self, torch.fx.Proxy):
                    return getattr(self, name)(*args, **kwargs)
                return real(self, *args, **kwargs)
            return method

        for n in names:
            setattr(torch.Tensor, n, unbound(n, getattr(base, n)))
        try:
            yield
        finally:
            for n in names:
                delattr(torch.Tensor, n)

    @contextlib.contextmanager
    def unseen_by_fx_refused(self):
        """While fx traces, what it records no node for and would take wrongly is refused, naming
        its line:
        - a torch.autocast region that forward enters (a `with`, a decorator, an autocast object
          made in __init__): the trace would take the region's ops in the module's dtype where
          torch runs them in the autocast dtype (a bf16 result from an fp32 module). An autocast
          that asked to be enabled counts even where this machine disables it (CUDA's, no GPU).
        - a custom torch.autograd.Function: fx runs its forward on the traced values, and its
          own backward (a straight-through estimator's) would be lost for the IR's."""
        cls = torch.amp.autocast_mode.autocast
        enter, exit_ = cls.__enter__, cls.__exit__
        apply = torch.autograd.Function.__dict__["apply"]
        tracer = self

        def watched_enter(obj):
            if getattr(obj, "_kgen_enabled", getattr(obj, "_enabled", False)):
                raise tracer._refusal("torch.autocast in forward (its ops in another dtype than the module's, "
                                      "which kgen's files run in); convert the module instead (model.to(torch.bfloat16))")
            if getattr(obj, "device", None) == "cuda":
                # CUDA's autocast turned off (a with, a decorator): inside a caller's autocast region
                # eager's ops there run in their operands' dtypes; the nodes fx makes meanwhile are
                # marked (AUTOCAST_OFF: kgen.frontend.autocast, and Tracer.run's float32 fact)
                line = next((f.f_lineno for f in _frames(sys._getframe(1)) if f.f_code.co_filename == tracer.filename),
                            None)
                tracer.autocast_off.append((line, tracer.text(line) if line else "forward's decorator"))
                tracer.autocast_off_depth += 1
                obj._kgen_off = True
            return enter(obj)

        def watched_exit(obj, *exc):
            if getattr(obj, "_kgen_off", False):
                obj._kgen_off = False
                tracer.autocast_off_depth -= 1
            return exit_(obj, *exc)

        def refused_apply(fn, *args, **kwargs):
            raise tracer._refusal(f"the custom torch.autograd.Function {fn.__name__} (kgen derives the backward "
                                  "from the forward's ops; the Function's own backward would be lost)")

        def traced_setitem(proxy, index, value):
            # y[mask] = v: fx's Proxy has no item assignment; recorded as operator.setitem on y
            # (Tracer.masked_assign takes a mask of y's shape, and refuses the rest in words)
            proxy.tracer.create_proxy("call_function", operator.setitem, (proxy, index, value), {})

        setitem = torch.fx.Proxy.__dict__.get("__setitem__")
        cls.__enter__, cls.__exit__ = watched_enter, watched_exit
        torch.autograd.Function.apply = classmethod(refused_apply)
        torch.fx.Proxy.__setitem__ = traced_setitem
        try:
            with autocast.asked_enabled():
                yield
        finally:
            cls.__enter__, cls.__exit__ = enter, exit_
            torch.autograd.Function.apply = apply
            if setitem is None:
                del torch.fx.Proxy.__setitem__
            else:
                torch.fx.Proxy.__setitem__ = setitem


# Where users find torch's functions, in the order a name is looked for (a refusal names the
# function as they wrote it, not as torch.ones' own __qualname__, _VariableFunctionsClass.ones).
PUBLIC_NAMESPACES = (("torch", torch), ("torch.nn.functional", F), ("torch.special", torch.special),
                     ("torch.linalg", torch.linalg), ("torch.fft", torch.fft))


def _public_name(fn) -> str:
    """The name users call `fn` by (torch.ones, torch.special.erfinv, F.adaptive_max_pool1d), else
    its module and qualified name."""
    for prefix, namespace in PUBLIC_NAMESPACES:
        for attr in dir(namespace):
            if not attr.startswith("_") and getattr(namespace, attr, None) is fn:
                return f"{prefix}.{attr}"
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return f"{getattr(fn, '__module__', None) or 'torch'}.{name}"


# fx's messages for what users write that it cannot trace, in kgen's words (fx's own say
# "Proxy", the class it traces with, and name no line: Tracer.run adds the line).
# What a value of each IR level is, in a refusal's words.
LEVEL_WORDS = {"tile": "a (batch, features) value", "row": "a (batch, 1) value", "rowflat": "a (batch,) value",
               "pooled": "a pooled (batch, P) value", "full": "a value of the input's shape",
               "scalar": "a number", "col": "a per-feature value"}
FX_FAILURES = {
    "'len' is not supported in symbolic tracing": "len() of a traced value (its batch size as a Python number, "
                                                  "which kgen's files, running at any batch, cannot bake in)",
    "Proxy object cannot be iterated": "a traced value unpacked or iterated (`*y.shape`, a loop over a tensor); "
                                       "write its sizes out",
    "cannot be used as inputs to control flow": "a branch on a traced value (an if or while on a tensor, its "
                                                "values or dtype); kgen traces one path of forward",
    "does not support item assignment": "an assignment into a value's elements (y[...] = v); write it with "
                                        "torch.where or an op",
    "is not installed as a submodule": "a module that holds parameters or buffers the model does not (one built "
                                       "in forward, or kept in a plain list); make it a submodule in __init__ "
                                       "(a stateless one, nn.GELU()(x), is taken)",
    # (torch.tensor(p) reads a Proxy's __cuda_array_interface__ as an array's: fx's Proxy of it)
    "`__cuda_array_interface__` must be a dict": "torch.tensor() / torch.as_tensor() of a tensor (a parameter "
                                                 "or a traced value): use the tensor itself, or .clone().detach() "
                                                 "of it",
    # (torch.finfo(x.dtype): fx's Proxy of the dtype, which finfo cannot read)
    "torch.finfo() requires a floating point input type": "torch.finfo() / torch.iinfo() of a traced value's "
                                                           "dtype (torch.finfo(x.dtype).min): a number that "
                                                           "depends on the dtype the module runs in, which "
                                                           "kgen's one file for float32, bfloat16 and float16 "
                                                           "cannot bake in; write the number (-1e4, "
                                                           "float('-inf')) instead",
    # (y.type(torch.FloatTensor): fx cannot record a tensor type as an argument)
    "argument of type: <class 'torch.tensortype'>": "a tensor type as an argument (y.type(torch.FloatTensor), "
                                                     "torch.cuda.HalfTensor): name the dtype instead "
                                                     "(y.to(torch.float32), y.to(x.dtype))",
    "not '_Proxy'": "a traced value turned into a Python number (float(t), int(t), math.f(t)): its value is "
                    "not known while tracing; keep it a tensor",
}
# A branch on a dtype (T5's `if self.wo.weight.dtype != h.dtype and self.wo.weight.dtype !=
# torch.int8: h = h.to(self.wo.weight.dtype)`): fx cannot read a traced value's dtype as a bool,
# and kgen's one trace serves the file's float32, bfloat16 and float16 builds, where a branch on
# the dtype may take another path in each (in a module of one dtype this one is a cast to the
# module's dtype, which kgen takes written without the branch; not every such branch is).
DTYPE_BRANCH = ("a branch on a traced value's dtype: kgen traces forward once for the float32, bfloat16 and "
                "float16 modules its file runs, where a branch on the dtype may take another path in each; "
                "write the path your module takes without the if (a cast to a parameter's dtype, "
                "h.to(self.wo.weight.dtype), is taken: in a module of one dtype it casts to the module's)")
# (torch.ones(y.shape[1], 4) and its kin: fx hands the factory a Proxy of the size, which it cannot
# take; torch says so in words that name neither)
_SIZE_FROM_A_VALUE = ("a tensor made in forward with a size read from a traced value (torch.ones(y.shape[1], 4), "
                      "torch.zeros(y.size(1), ...)): make it in __init__ with the sizes the module is built with "
                      "(self.register_buffer), or one of the value's own shape from it (torch.ones_like(y))")
FX_FAILURES.update({f"{factory}() {said}": _SIZE_FROM_A_VALUE
                    for factory in ("ones", "zeros", "empty", "rand", "randn", "randint", "ones_like", "zeros_like")
                    for said in ("takes 1 positional argument but",
                                 "received an invalid combination of arguments - got (_Proxy")})


def _converts(fx_node: torch.fx.Node) -> bool:
    """Whether fx_node is a conversion to a dtype named in the source (x.float(), x.to(torch.float32),
    x.half()): the tensor itself where the module is in that dtype, a copy where it is not.
    x.to(y.dtype), x.type_as(y) of the module's own values and x.to(device) are the tensor itself
    in every dtype."""
    if fx_node.op != "call_method" or fx_node.target not in DTYPE_ALIAS_METHODS:
        return False
    if fx_node.target in ("float", "double", "half", "bfloat16"):
        return True
    named = [*fx_node.args[1:], *fx_node.kwargs.values()]
    return any(isinstance(a, (torch.dtype, str)) for a in named)


TENSOR_FACTS = frozenset({"dtype", "device", "shape", "ndim", "is_cuda", "layout", "requires_grad"})


def _reads_values(user: torch.fx.Node, value: torch.fx.Node) -> bool:
    """Whether fx node `user` reads the elements of `value`, not a fact of it alone: its dtype,
    device or shape (`input_dtype = x.dtype`, which fx records where the name is first used, after
    an in-place op of the code written below it), y.type_as(value), y.to(value)."""
    if user.op == "call_function" and user.target is getattr and user.args[0] is value \
            and user.args[1] in TENSOR_FACTS:
        return False
    if user.op == "call_method" and user.target in ("size", "dim") and user.args[0] is value:
        return False
    if user.op == "call_method" and user.target in ("type_as", "to") and user.args[0] is not value \
            and value not in user.kwargs.values():
        return False
    return True


def _not_a_tensor(path: str, value) -> str:
    """Why the module's attribute `path` is not a tensor kgen can read."""
    if isinstance(value, torch.fx.Proxy):
        # (forward rebound it: self.steps += 1 on a buffer, a counter the module keeps)
        return (f"self.{path} is assigned in forward (state the module updates on each call, such as a "
                "step counter); kgen's forward changes no attribute of the module")
    return f"self.{path} is not a tensor"


def _tracebacks(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _frames(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


# Markers of a parameter that is not a GEMM's weight (a scalar, a per-feature vector): an op on
# them alone before the first GEMM is deferred to its first use (Tracer._deferrable).
PARAMETER_KINDS = frozenset({"tensor"})
# ... and so are ops on the module's input, and on both (Tracer._deferrable).
DEFERRABLE_KINDS = PARAMETER_KINDS | {"input", "extra_input"}
TRANSPOSED_ACTIVATION = ("a transposed activation (x.T) used other than as W @ x.T transposed back: kgen "
                         "takes (W @ x.T).T, which is x @ W.T, the Linear's GEMM")
# fx node meta: made with gradients off (torch.no_grad(), set_grad_enabled(False), inference_mode)
NO_GRAD = "kgen_no_grad"


# fx node meta: the node is `name op= value` (Tracer._augmented_assignments).
AUGMENTED = "kgen_augmented"


@functools.lru_cache(maxsize=1024)
def _augmented_stores(code) -> frozenset:
    """The bytecode offsets in `code` of the operations of augmented assignments to a name
    (x += y, x **= 2, x //= c; an attribute's or an element's are not: Tracer refuses or takes
    those on their own terms): each operation followed by the store to the name."""
    found, previous = set(), None
    for ins in dis.get_instructions(code):
        if previous is not None and ins.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
            found.add(previous)
        inplace = (ins.opname == "BINARY_OP" and ins.argrepr.endswith("=")) if sys.version_info >= (3, 11) \
            else ins.opname.startswith("INPLACE_")
        previous = ins.offset if inplace else None
    return frozenset(found)


def _augmented_assignment(code, offset: int) -> bool:
    return offset in _augmented_stores(code)


def _held_as(value, dtype) -> float:
    """The number a one-element tensor made with dtype= `dtype` holds (x.new_tensor(0.1,
    dtype=torch.bfloat16) holds 0.10009765625, which is what forward multiplies by): `value`
    rounded to a floating torch.dtype named, as it is otherwise (the module's dtype, y.dtype)."""
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return float(torch.tensor(float(value), dtype=dtype))
    return float(value)


class _SideBySide(BaseException):
    """Raised mid-walk where a Linear of the module's input follows another (LlamaMLP's
    `down_proj(F.silu(gate_proj(x)) * up_proj(x))`): Tracer.run walks the forward again with
    `calls` (the Linears' (weight, bias, stored_kn), in the order the forward calls them) known
    from the start, as one GEMM (Tracer.side_by_side_gemm). A BaseException, so that no handler
    of the walk's own failures (`except Exception`) takes it for one."""

    def __init__(self, calls: tuple):
        super().__init__(calls)
        self.calls = calls


# How many Linears of one input kgen takes side by side: a gated unit's two (the one GEMM's output
# halves, its `half` nodes).
MAX_SIDE_BY_SIDE = 2


class Tracer:
    def __init__(self, ref: Reference, model: nn.Module | None = None, leads: int = 0):
        self.ref = ref
        # An input of more dimensions (Reference.rows_of) traced with its leading sizes, as the
        # forward reads them (lead_trace): how many there are (0: traced on its rows).
        self.leads = leads
        self.lead_rank = 0   # while an op of a value with them runs: its number of dimensions (_on_lead)
        self.model = ref.meta_model() if model is None else model
        # Training mode, whatever __init__ left (a module that calls self.eval() there is trained
        # after its user's .train(): its Dropout must be in the IR); _trace's eval trace sets eval.
        self.model.train()
        self.nodes: list[Node] = []
        self.where: tuple[int | None, str] = (None, "")
        self.params: dict[str, int] = {}
        self.dropouts: list[dict] = []   # active dropouts (Tracer.dropout)
        self.dropout_is_identity = False   # every dropout taken as the identity (_trace's mode check)
        self.fp32_casts: list[tuple] = []   # casts to float32 taken as no-ops (Graph.fp32_casts)
        self.upcasts: list[tuple] = []   # casts to float32 in a 16-bit module (Tracer._fp32_cast)
        # values that are integer tensors in torch (torch.where of two Python ints, and sums and
        # products of them with ints): a Python float, a division or a float op makes them float32
        self.integer_values: set[int] = set()
        self.sizes_read: list[tuple] = []   # feature sizes read as numbers (Graph.sizes_read)
        self.no_derivative: list[tuple] = []   # ops torch has no derivative for (Graph.no_derivative)
        self.output_tail: tuple = ()   # torch's last op on the kernel's output (Graph.output_tail)
        self.tail_rounds = False   # (Graph.tail_rounds)
        self.consts: dict[float, int] = {}
        self.inputs: dict[bool, int] = {}   # the module's input read in this part (detached?)
        # get_inputs()' tensors after the input read in this part ((index, detached?): node)
        self.extra_reads: dict[tuple, int] = {}
        self.queries_read: dict[str, int] = {}   # ENVIRONMENT_QUERIES the forward read, at their lines
        self.seeded: list[int] = []   # lines where the forward seeds torch's generator (SEEDING)
        self.other_answers: frozenset = frozenset()   # the queries answered with their other value
        # Linears of the module's input taken side by side as one GEMM ((weight, bias, stored_kn) of
        # each, in call order: _SideBySide), and that GEMM's output once made (side_by_side_gemm).
        self.side_by_side: tuple = ()
        self.side_by_side_output: int | None = None

    # ---- errors --------------------------------------------------------------------------
    def refuse(self, what: str) -> Unsupported:
        line, text = self.where
        at = f"line {line}: `{text}`: " if line else ""
        return Unsupported(f"{self.ref.path}: {at}{what}. kgen synthesizes GEMMs, each followed by "
                           "an epilogue chain (`kgen ops` lists what it takes)")

    def rows_note(self) -> str:
        """What a refusal of reading the input's sizes adds where the input has more dimensions
        (Reference.rows_of): the forward was traced on a 2-d tensor, which the user did not give it,
        so `B, S, D = x.shape` failing to unpack, or h.shape[2] missing, says nothing without it."""
        if getattr(self.ref, "rows_of", None) is None:
            return ""
        k = int(self.ref.input.shape[1])
        rows = (f"its rows, x.reshape(-1, {k})" if self.ref.feature_dims == 1 else
                f"x.reshape(x.shape[0], -1), its features flattened")
        return (f" (the input is {self.ref.rows_text()}, shape {self.ref.rows_of}: kgen traces the forward on "
                f"{rows}, a 2-d tensor, so a forward that reads the input's other sizes (B, S, D = x.shape, "
                f"h.shape[2]) is not taken; write it over the last dimension (x.shape[-1], "
                f"x.reshape(-1, x.shape[-1])), or give kgen a (batch, {k}) input)")

    def _locate(self, fx_node: torch.fx.Node):
        self.where = _frame(fx_node) or (None, fx_node.format_node())

    # ---- node construction ---------------------------------------------------------------
    def add(self, kind: str, level: str, args=(), op: str = "", **attrs) -> int:
        args = tuple(int(a) for a in args)
        # (eager holds the result in float32 after an upcast, until the cast back: Node.fp32)
        fp32 = op in ("to_float32", "to_opmath") or (op != "to_module_dtype" and kind not in ("const", "param", "mask", "input", "gemm")
                                      and any(self.nodes[a].fp32 for a in args))
        node = Node(len(self.nodes), kind, level, args, op, attrs, *self.where, fp32=fp32)
        self.nodes.append(node)
        return _Id(node.id)

    def const(self, value) -> int:
        if not _is_number(value):
            if any(isinstance(v, (_Marker, _Id)) for v in (value if isinstance(value, (tuple, list)) else ())):
                raise self.refuse("a tuple of a traced value's sizes used as a value (y.size()[:-1] + (n,) "
                                  "for a view: kgen takes numbers, x.size(d) and x.shape[d]; write the sizes out)")
            raise self.refuse(f"the constant {value!r} is not a number")
        value = float(value)
        if value not in self.consts:
            self.consts[value] = self.add("const", "scalar", value=value)
        return self.consts[value]

    def value(self, v) -> int:
        """An IR node id for an fx argument (a node's value or a Python number)."""
        if isinstance(v, _Id):
            return v
        if isinstance(v, _Marker) and v.kind == "weight_expr":
            # a computation of parameters used other than as a GEMM's weight: what it was
            # before weights could be computed (a value of the epilogue, or a refusal)
            return self.value(self._replay(*v.payload))
        if isinstance(v, _Marker) and v.kind in ("tensor", "matrix") and self.gemm_id is not None:
            return self.param(v.payload, v.shape)
        if isinstance(v, _Marker) and v.kind == "matrix_t" and self.gemm_id is not None:
            # W.t() read as a value, not as a GEMM's weight: a view like any other.
            return self.value(self.param_view(_Marker("matrix", v.payload), "t", (), {}))
        if isinstance(v, _Marker) and v.kind == "input":
            return self.input_node(v.payload)
        if isinstance(v, _Marker) and v.kind == "extra_input":
            return self.extra_input_node(*v.payload)
        if isinstance(v, _Marker) and v.kind == "scaled_input":
            # (the input scaled by a number, used other than as the first GEMM's input)
            x = self.input_node(False)
            for op, operand in v.payload:
                x = self.pointwise(op, [x, self._scaling_operand(operand)])
            return x
        if isinstance(v, _Marker) and v.kind == "earlier":
            raise self.refuse(f"a value computed before the GEMM at line {v.payload} is used after "
                              "it (kgen chains GEMMs through the next GEMM's input alone)")
        if isinstance(v, _Marker) and v.kind == "comparison":
            # A comparison as a number (x * (x > 0), (x > 0).float()): 1 where it holds, else 0,
            # as torch promotes a bool tensor; no gradient flows through it.
            compare, lhs, rhs = v.payload
            return self.pointwise("where", [lhs, rhs, 1.0, 0.0], {"compare": compare})
        if isinstance(v, _Marker) and v.kind == "keywords":
            raise self.refuse("Model.forward reads its **kwargs (the module is called with its input alone, "
                              "so they are empty)")
        if isinstance(v, _Marker) and v.kind == "inputs":
            raise self.refuse("forward(*args) using args other than as args[0] (its one input)")
        if isinstance(v, _Marker) and v.kind == "extra_args":
            raise self.refuse("Model.forward reads its *args after the input (the module is called with its "
                              "input alone, so they are empty)")
        if isinstance(v, _Marker) and v.kind == "filled":
            raise self.refuse("torch.zeros_like / ones_like / full_like used other than as an operand "
                              "of a point-wise op")
        if isinstance(v, _Marker) and v.kind == "group":
            raise self._group_refusal(f"its {v.payload[0]} used otherwise")
        if isinstance(v, _Marker) and v.kind == "broadcast":
            raise self.refuse("a value expanded to a larger shape (expand / expand_as / broadcast_to / "
                              "repeat, or combined with a zeros_like / ones_like / full_like of a larger "
                              "one) used other than as an operand of a point-wise op")
        if isinstance(v, _Marker) and v.kind == "transposed":
            raise self.refuse(TRANSPOSED_ACTIVATION)
        if isinstance(v, _Marker) and v.kind == "indices":
            raise self.refuse("the indices of torch.max / torch.min (argmax) are not supported")
        if isinstance(v, _Marker) and v.kind == "windows":
            raise self.refuse("a (batch, P, k) view used other than by its max or mean over the last dim "
                              "(1-d pooling)")
        if isinstance(v, _Marker) and v.kind == "lead_size":
            raise self.refuse("a leading size of the input (B, S, D = x.shape) used as a number (kgen's files run at "
                              "any sizes; it takes them as sizes of view / reshape only)")
        if isinstance(v, _Marker) and v.kind in ("lead", "lead_t"):
            raise self.refuse("a value with the input's leading sizes (B, S, ...) used here (kgen takes it in "
                              "ops over its last dimension, and viewed as its rows, view(-1, N), and back)")
        if isinstance(v, _Marker) and v.kind in ("batch", "shape"):
            raise self.refuse("the batch size used as a number (kgen's files run at any batch; "
                              "it takes x.size(0) as a size of view / reshape only)")
        if isinstance(v, _Marker) and v.kind == "unsqueezed":
            raise self.refuse("a (batch, 1, features) view is used other than as the input of "
                              "MaxPool1d / AvgPool1d (squeeze(1) the result)")
        if isinstance(v, _Marker):
            refusal = self.refuse(f"{v.payload or 'the input'} is used outside a GEMM")
            if self.gemm_id is None and v.kind in PARAMETER_KINDS:
                raise _BeforeTheGemm(str(refusal))   # (Tracer.run defers the op: _Deferred)
            raise refusal
        return self.const(v)

    def level(self, i: int) -> str:
        return self.nodes[i].level

    def _tile_input(self, x: int) -> bool:
        """Make the module's input, read after the GEMM, a tile-level value where x (a value
        computed from it, about to meet a row op, a norm or BatchNorm) is (batch, N) and N is the
        input's own width: `norm(x + fc(x))`, `softmax(fc(x) + x)`. The kernels then read the input
        per element as they read Dropout's mask (`p.operand[k][m * N + n]`). Only where every value
        computed from the input so far is point-wise of shape (batch, N) with no other operand of
        another shape; else the input stays `full` (the broadcast tail's) and the caller refuses.
        Returns whether x is now tile-level."""
        if not isinstance(x, int) or self.level(x) != "full" or tuple(self.shape_of(x)) != ("M", self.out_features):
            return False
        # (the module's input where in_features is N; an extra input of the output's shape: a
        # read of another shape is in `spread` and refused below)
        reads = set(self.inputs.values()) | set(self.extra_reads.values())
        if not reads:
            return False
        spread = {i for i in reads}
        for n in self.nodes:
            if any(a in spread for a in n.args):
                spread.add(n.id)
        if x not in spread:
            return False
        for i in spread:
            n = self.nodes[i]
            if n.level != "full":
                continue   # (a row reduction of such a value cannot exist yet: it was refused)
            if n.kind not in ("input", "pointwise") or tuple(n.shape) != ("M", self.out_features):
                return False
            if any(self.level(a) in ("free", "full") and a not in spread for a in n.args):
                return False
        for i in spread:
            if self.nodes[i].level == "full":   # (the input keeps its shape: the file checks it)
                self.nodes[i].level = "tile"
                if self.nodes[i].kind != "input":
                    self.nodes[i].shape = ()
        return True

    def _not_batch_features(self, x) -> str:
        """What a value a row op cannot take is, for its refusal: one that reads the module's input
        other than as a (batch, N) value (_tile_input), else one that is not (batch, features)."""
        if isinstance(x, int) and self.level(x) == "full" and not self._reads_input(x):
            # (a parameter of more dimensions, (1, 1, N), broadcasts a (batch, N) value to (1, M, N):
            # no input in it, which the messages below would name)
            return (f"a value of shape {shape_text(tuple(self.shape_of(x)))}, which a parameter of more "
                    "dimensions than (batch, features) broadcast it to (kgen's row ops take (batch, features) "
                    "values: give the parameter the shape (N,) or (1, N))")
        narrow = [n for n in self.nodes if n.kind == "input" and n.attrs.get("index") and n.level == "full"
                  and tuple(n.shape) != ("M", self.out_features)] if isinstance(x, int) else []
        if narrow and any(self._depends(x, n.id) for n in narrow):
            n = next(n for n in narrow if self._depends(x, n.id))
            return (f"a value that reads get_inputs()' tensor {n.attrs['index'] + 1}, of shape "
                    f"{shape_text(('batch', *n.shape[1:]))} (before a row op, a norm or BatchNorm kgen reads an "
                    f"input after the first per element, (batch, {self.out_features}))")
        if isinstance(x, int) and self.level(x) == "full":
            if self.module_in_features != self.out_features or tuple(self.shape_of(x)) != ("M", self.out_features):
                return (f"a value that reads the module's input and is not (batch, {self.out_features}) "
                        f"(a residual with x before a row op needs in_features = out_features, here "
                        f"{self.module_in_features} and {self.out_features}; else kgen reads the input in "
                        "the point-wise ops after the last reduction or norm)")
            return ("a value that reads the module's input, where a value computed from the input has "
                    f"another shape than (batch, {self.out_features}) (an operand of another shape: kgen "
                    "reads the input before a row op only where every value computed from it is (batch, N))")
        return "a value that is not (batch, features)"

    def _reads_input(self, x: int) -> bool:
        """Whether the value x is computed from the module's input read after the GEMM."""
        seen, todo = set(), [int(x)]
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                if self.nodes[i].kind == "input":
                    return True
                todo.extend(self.nodes[i].args)
        return False

    def input_node(self, detached: bool) -> int:
        """The module's input as a value after the GEMM: level full, shape (M, in_features of
        the first GEMM), read per element by the broadcast tail (a residual such as
        `x + original_x`). Before the GEMM it is refused: kgen's GEMM comes first."""
        if self.gemm_id is None:
            if self.trying_deferral:
                raise _BeforeTheGemm(str(self.refuse(INPUT_BEFORE_THE_GEMM)))   # (Tracer.run defers the op)
            self.prologue()
        if self.in_prologue():
            if detached:
                raise self.refuse("a detached copy of the module's input (x.detach()) before the first GEMM (kgen's "
                                  "ops before the GEMM read the input itself, and send it its gradient)")
            return self.gemm_id
        if detached not in self.inputs:
            node = self.add("input", "full", path=INPUT_PATH, detached=detached)
            self.nodes[node].shape = ("M", self.module_in_features)
            self.inputs[detached] = node
        return self.inputs[detached]

    def extra_input_node(self, index: int, detached: bool) -> int:
        """get_inputs()' tensor `index` (1: the one after the module's input; Reference.extra_inputs)
        as a value after the GEMM: level full, shape (M, its last dimension), read per element as
        the module's input is (input_node), under its own operand path (graph.input_path). Before
        the GEMM an op on it is deferred to its first use after the GEMM; one the GEMM reads is
        refused (Tracer.gemm)."""
        if self.gemm_id is None or self.in_prologue():
            raise _BeforeTheGemm(str(self.refuse(EXTRA_INPUT_BEFORE_THE_GEMM)))   # (Tracer.run defers the op)
        if (index, detached) not in self.extra_reads:
            node = self.add("input", "full", path=input_path(index), detached=detached, index=index)
            self.nodes[node].shape = ("M", int(self.ref.extra_inputs[index - 1].shape[-1]))
            self.extra_reads[(index, detached)] = node
        return self.extra_reads[(index, detached)]

    def attribute(self, path: str) -> _Marker:
        """A parameter or buffer read by get_attr: a marker until its use says what it is (a
        GEMM's weight matrix, or a value of the epilogue, whose level needs N)."""
        module_path, _, name = path.rpartition(".")
        owner = self.model.get_submodule(module_path) if module_path else self.model
        t = getattr(owner, name)
        if not isinstance(t, torch.Tensor):
            raise self.refuse(_not_a_tensor(path, t))
        if not module_path and name.startswith("_tensor_constant"):
            # torch.fx's name for a tensor made in forward (torch.tensor(2.0)): not the module's,
            # so the emitted file could not read it.
            return self._made_in_forward(t)
        if name not in owner._parameters and name not in owner._buffers:
            # A tensor kept as a plain attribute (self.scale = torch.tensor(0.5) in __init__):
            # model.to(device) / .cuda() / .double() leave it as it is and state_dict() lacks it, so
            # the emitted forward, which checks that each tensor it reads is on the input's device
            # and in its dtype, would raise on the GPU where the module itself runs (torch takes a
            # 0-d CPU tensor beside CUDA ones).
            raise self.refuse(f"the tensor self.{path} of shape {shape_text(tuple(t.shape))} is a plain attribute, "
                              "not a parameter or buffer (model.to(device) / .cuda() / .double() do not move or "
                              "convert it): register it in __init__ with self.register_buffer"
                              f"('{name}', ...), or keep a number as a Python float")
        return _Marker("matrix" if t.dim() == 2 else "tensor", path)

    def _made_in_forward(self, t: torch.Tensor) -> "_TensorNumber":
        """A tensor made in forward (torch.tensor(2.0), torch.ones(1, device=x.device)), not the
        module's, so the emitted file could not read it: of one element, the number it holds (a
        float one of a dimension promotes as a tensor: _promoting_constant); else refused."""
        if t.numel() == 1 and not t.is_meta and not t.is_complex() and t.dtype != torch.bool:
            if t.dim() and t.dtype in (torch.float32, torch.float64):
                self._promoting_constant(t)
            return _TensorNumber(t.item())
        raise self.refuse(f"a tensor of shape {shape_text(tuple(t.shape))} made in forward (torch.tensor / "
                          "torch.ones / ...) or read from a global (or computed from a tensor kept as a "
                          "plain attribute), not the module's: kgen reads the module's parameters and "
                          "buffers; make it one in __init__ (self.register_buffer)")

    def factory(self, fn, args, kwargs):
        """torch.ones / zeros / full in forward with a device or dtype read from a traced value
        (torch.ones(1, device=x.device)): fx records the call where it would otherwise make the
        tensor at trace time and lift it as a _tensor_constant; made here on the host, in the
        dtype named (x.dtype: the module's), and taken as that tensor (_made_in_forward)."""
        name = _public_name(fn)
        made = {k: kwargs.pop(k) for k in ("dtype", "device", "requires_grad", "layout", "pin_memory") if k in kwargs}
        if fn is torch.full:
            a = self._bind(lambda size, fill_value: None, args, kwargs)
            size, fill = a["size"], a["fill_value"]
        else:
            size = kwargs.pop("size", None) if not args else args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            fill = 1.0 if fn is torch.ones else 0.0
            if kwargs or size is None:
                raise self.refuse(f"{name} with arguments {sorted(kwargs) or 'without a size'}")
        size = tuple(size) if isinstance(size, (tuple, list)) else (size,)
        if not all(type(n) is int and n >= 0 for n in size):
            raise self.refuse(_SIZE_FROM_A_VALUE)
        if not _is_number(fill) or made.get("requires_grad") or made.get("layout") not in (None, torch.strided):
            raise self.refuse(f"{name} with fill {fill!r}, {made}")
        dtype = made.get("dtype")
        one_element = math.prod(size) == 1 and not size
        why = self._factory_refusal(name, dtype, made.get("device"), one_element)
        if why is not None:
            raise self.refuse(why)
        if isinstance(dtype, _Marker):   # (x.dtype: the module's)
            dtype = dtype.payload
        return self._made_in_forward(torch.full(size, fill, dtype=dtype))

    def _promoting_constant(self, t: torch.Tensor) -> None:
        """A one-element float32 / float64 tensor of a dimension made in forward (torch.tensor([0.5]),
        torch.ones(1)): unlike a 0-d one or a number, it takes part in type promotion as a tensor,
        so y * it is float32 where y is 16-bit (float64 always). A float32 fact in a float32 module
        (the file runs float32 modules), refused elsewhere. (Taken as its number before, a 16-bit
        module's output was its own dtype where eager's is float32.)"""
        own, shape = self.ref.input.dtype, shape_text(tuple(t.shape))
        if t.dtype == torch.float32 and own == torch.float32:
            self._float32_tensor_fact(f"a float32 tensor of shape {shape} made in forward (a tensor of a "
                                      "dimension takes part in type promotion, where a 0-d one does not)")
            return
        raise self.refuse(f"a {t.dtype} tensor of shape {shape} made in forward in a {own} module: a tensor of a "
                          f"dimension takes part in type promotion (a 0-d one does not), so eager's result is "
                          f"{t.dtype}, where kgen's is the module's dtype; write the number, or torch.tensor(c) "
                          "of no dimension")

    def _is_matrix(self, v) -> bool:
        """A 2-D parameter or buffer with no dimension of 1 (a weight matrix: (N, 1) and (1, N)
        ones are per-feature values of the epilogue), or its transpose."""
        if not (isinstance(v, _Marker) and v.kind in ("matrix", "matrix_t") and isinstance(v.payload, str)):
            return False
        t = self._tensor(v.payload)
        shape = tuple(v.shape) if v.shape is not None else tuple(t.shape)
        return t.dim() == 2 and len(shape) == 2 and min(shape) > 1

    def _computes_a_weight(self, fx_node: torch.fx.Node, args, kwargs) -> bool:
        """Whether this op computes from the module's parameters alone, a weight matrix or such a
        computation among its operands: a GEMM's weight written as an expression
        (F.linear(x, self.weight * self.scale), w = F.normalize(self.prototypes, dim=1) then
        x @ w.t(), self.a @ self.b). It stays an fx node (a "weight_expr" marker) that the GEMM
        taking it turns into Python (Tracer._weight_expression). A view of one weight matrix
        (W.t(), W.T, W.view(...)) stays what it was: x @ W.t() is the plain GEMM."""
        flat = []
        for v in [*args, *kwargs.values()]:
            flat.extend(v if isinstance(v, (tuple, list)) else [v])
        markers = [v for v in flat if isinstance(v, _Marker)]
        if not any(m.kind == "weight_expr" or self._is_matrix(m) for m in markers):
            return False
        if any(isinstance(v, (_Id, _TensorNumber, torch.fx.Node)) for v in flat) or \
                any(m.kind not in ("tensor", "matrix", "matrix_t", "weight_expr") for m in markers):
            return False   # x takes part (a GEMM, or a value of the epilogue)
        target = fx_node.target
        if fx_node.op == "call_method" and target in NOT_TENSOR_METHODS:
            return False
        if target in DROPOUT_OPS or (fx_node.op == "call_method" and target == "dropout"):
            return False   # a random mask, and a mode: not a weight kgen computes once per forward
        if fx_node.op == "call_method" and target in WEIGHT_ITSELF_METHODS and len(markers) == 1 \
                and markers[0].kind != "weight_expr":
            return False   # W.contiguous(), W.clone(), W.detach(): the weight itself
        if target is getattr and flat[-1] not in ("T", "mT"):
            return False   # w.shape, w.dtype: not a tensor
        plain = [m for m in markers if m.kind != "weight_expr"]
        if len(markers) == 1 and plain and (target is getattr or (fx_node.op == "call_method" and target in PARAM_VIEWS)):
            return False
        return True

    def _weight_expression(self, fx_node: torch.fx.Node, transposed: bool) -> "WeightExpr":
        """The Python that computes a weight written as an expression (`fx_node`, of the module's
        parameters alone), as torch.fx writes it for the subgraph that computes it, returning the
        (N, K) matrix the GEMM reads: the value itself for F.linear(x, w), its transpose for
        x @ w. An outer transpose (w.t() of an expression) is folded into `transposed`."""
        while (fx_node.op == "call_method" and fx_node.target in ("t", "transpose") and len(fx_node.args) in (1, 3)) or \
                (fx_node.target is getattr and fx_node.args[1] in ("T", "mT")):
            inner = fx_node.args[0]
            if not (isinstance(inner, torch.fx.Node) and inner.op in ("call_function", "call_method")):
                break
            fx_node, transposed = inner, not transposed
        needed, stack = set(), [fx_node]
        while stack:
            n = stack.pop()
            if n not in needed:
                needed.add(n)
                stack.extend(n.all_input_nodes)
        if any(n.op == "placeholder" for n in needed):
            raise self.refuse("a GEMM weight computed from the input (its size, x.size(1)); kgen computes "
                              "a weight from the module's parameters and numbers alone")
        graph, env = torch.fx.Graph(), {}
        for n in fx_node.graph.nodes:
            if n in needed:
                env[n] = graph.node_copy(n, lambda a: env[a])
        graph.output(env[fx_node])
        module = torch.fx.GraphModule(self.model, graph)
        code = module.graph.python_code(root_module="self")
        body = [line.strip() for line in code.src.strip().splitlines()[1:] if line.strip()]
        assert body[-1].startswith("return "), body
        result = body.pop()[len("return "):]
        body = _weight_globals(body, code.globals, self.refuse) + body
        body.append(f"return {result}{'.t()' if transposed else ''}.contiguous()")
        try:
            with torch.no_grad():
                value = module()
            if value.dim() != 2:
                raise ValueError(f"a weight of shape {tuple(value.shape)}")
            value = value.t() if transposed else value
        except Exception as e:
            raise self.refuse(f"a GEMM weight computed from the parameters that kgen could not evaluate "
                              f"({type(e).__name__}: {str(e)[:200]})") from None
        frame = _frame(fx_node)
        name = f"computed at line {frame[0]}, `{frame[1]}`" if frame else f"computed by {fx_node.name}"
        return WeightExpr(tuple(body), name, value)

    def _tensor(self, path: str) -> torch.Tensor:
        if side_by_side_parts(path) is not None:   # (side-by-side Linears' biases: Tracer.side_by_side_gemm)
            return module_tensor(self.model, path)
        module_path, _, name = path.rpartition(".")
        owner = self.model.get_submodule(module_path) if module_path else self.model
        t = getattr(owner, name)
        if not isinstance(t, torch.Tensor):
            raise self.refuse(_not_a_tensor(path, t))
        return t

    def param(self, path: str, view: tuple | None = None) -> int:
        """The IR node of a parameter or buffer used as a value of the epilogue, read as the
        shape `view` (an order-keeping view of it: Tracer.param_view; None: its own shape).
        The node's `shape` is the view's, its data the parameter's storage, in order: an (N, 1)
        bias read as bias.t() is a per-column (1, N) value of N contiguous floats. A bool buffer
        (a mask) has attrs["bool"]: the emitted forward and the oracle read it in the module's
        dtype, 1 and 0, as torch promotes it in x * mask (and Tracer._condition compares it)."""
        t = self._tensor(path)
        shape = tuple(t.shape) if view is None else tuple(view)
        if path in self.params:
            known = self.nodes[self.params[path]].attrs["shape"]
            # Shapes that differ in leading 1s broadcast alike: one node serves both.
            if _strip_leading_ones(known) != _strip_leading_ones(shape):
                raise self.refuse(f"the parameter {path} is read as {shape_text(known)} and as "
                                  f"{shape_text(shape)} (kgen reads each parameter as one shape)")
            return self.params[path]
        n = self.out_features
        numel = 1
        for d in shape:
            numel *= d
        if numel == 1 and len(shape) <= 2:
            level = "scalar"
        elif n is not None and shape in ((n,), (1, n)):
            level = "col"
        else:
            level = "free"     # broadcast as torch does, in the output's tail (ir.py)
        if t.dtype not in MODULE_DTYPES and t.dtype != torch.bool:
            kind = "parameter" if isinstance(t, nn.Parameter) else "buffer"
            raise self.refuse(f"the {kind} {path} is {t.dtype}; kgen reads parameters and buffers of float32, "
                              "bfloat16 or float16 (or bool) only: register it in the module's dtype")
        self.params[path] = self.add("param", level, path=path, shape=shape,
                                     **({"bool": True} if t.dtype == torch.bool else {}))
        return self.params[path]

    def _condition(self, v):
        """A bool parameter or buffer as a condition (torch.where(self.mask, ...),
        x.masked_fill(self.mask, v), ~self.mask): the comparison mask > 0.5 of it read as 1 and 0
        (Tracer.param); anything else as it is."""
        if isinstance(v, _Marker) and v.kind in ("tensor", "matrix") and isinstance(v.payload, str) \
                and self._tensor(v.payload).dtype == torch.bool and self.gemm_id is not None:
            return _Marker("comparison", ("gt", self.param(v.payload, v.shape), 0.5))
        return v

    def param_view(self, marker: _Marker, method: str, args, kwargs) -> _Marker:
        """`method` (view, reshape, t, ...) of a parameter's marker: the same parameter read as
        the view's shape. Only views that keep the elements' order are taken (the kernels read a
        parameter's storage in order); a transpose of an (A, B) parameter with A, B > 1 is refused."""
        path = marker.payload
        shape = tuple(self._tensor(path).shape) if marker.shape is None else marker.shape
        if any(isinstance(a, (_Id, _Marker)) for a in (*args, *kwargs.values())):
            raise self.refuse(f"{path}.{method}() with a size computed from a tensor (kgen takes "
                              "views of parameters to constant shapes)")
        try:
            viewed = getattr(torch.empty(shape, device="meta"), method)(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError) as e:
            raise self.refuse(f"{path}.{method}(): {e}") from None
        if viewed.numel() != math.prod(shape):
            raise self.refuse(f"{path}[...] selects part of the parameter {path} (kgen reads whole parameters)")
        if not viewed.is_contiguous():
            raise self.refuse(f"{path}.{method}() of the {shape_text(shape)} parameter {path} changes "
                              "the order of its elements (a transpose); kgen reads parameters in "
                              "their storage order: store the parameter transposed instead")
        return _Marker("matrix" if viewed.dim() == 2 else "tensor", path, tuple(viewed.shape))

    def shape_of(self, i: int) -> tuple:
        """The shape of node i's value, "M" standing for the batch."""
        n = self.nodes[i]
        if n.kind == "param":
            return n.attrs["shape"]
        if n.level == "full":
            return n.shape
        if n.level in ("col", "scalar"):
            shape = ()
            for a in n.args:
                shape = broadcast_shapes(shape, self.shape_of(a))
            return shape
        if n.level in ("tile", "row", "rowflat"):
            return {"tile": ("M", self.out_features), "row": ("M", 1), "rowflat": ("M",)}[n.level]
        assert n.level == "pooled", n   # (a free value is a parameter; ops on one are full)
        return ("M", pooled_columns(self.nodes, self.out_features))   # (the pooling's, or GLU's halves')

    def pointwise(self, op: str, args: list, attrs: dict | None = None) -> int:
        """Point-wise op `op` of `args` (Tracer._pointwise), following torch's integer tensors
        (integer_values): where every tensor operand is one, a sum, difference or product with
        Python ints (or a negation, an absolute value) is one too; a Python float, a division or
        any other op makes a float32 tensor of it (torch's default dtype, whatever the module's),
        which promotes a 16-bit y: a float32 fact. With a float tensor the result is that one's."""
        tensors = [a for a in args if isinstance(a, (_Id, _Marker))]
        if any(type(a) is bool for a in args) and tensors:
            # y * True, y + False: torch promotes a Python bool beside a tensor as the int 1 / 0
            # (y - True raises in torch: its subtraction takes no bool)
            if op not in BOOL_OPERAND_OPS:
                raise self.refuse(f"{op} of a tensor and a Python bool (kgen takes a bool as the number 1 or 0 in "
                                  f"{', '.join(BOOL_OPERAND_OPS)}, where torch does)")
            args = [int(a) if type(a) is bool else a for a in args]
        integer = bool(tensors) and all(isinstance(a, _Id) and a in self.integer_values for a in tensors)
        python_float = _has_python_float(args)
        keeps_integer = integer and op in ("add", "sub", "mul", "neg", "abs") and not python_float
        if integer and not keeps_integer:
            self._default_dtype_fact(f"{op} of an integer tensor (torch.where of two Python ints) with a Python "
                                     "float, a division or a float op")
        if tensors and all(_is_comparison(a) for a in tensors) and python_float:
            # (x > 0) * 0.1: torch promotes the bool to its default dtype (kgen's value is the
            # comparison as 1.0 / 0.0: Tracer.value); with an int it is an integer tensor (refused)
            self._default_dtype_fact("a comparison combined with a Python float, as in `(x > 0) * 0.1`,")
        result = self._pointwise(op, args, attrs)
        if keeps_integer and isinstance(result, _Id):
            self.integer_values.add(result)
        return result

    def _pointwise(self, op: str, args: list, attrs: dict | None = None) -> int:
        if any(isinstance(a, _Marker) and a.kind in ("group", "windows") for a in args):
            return self._group_pointwise(op, args, attrs or {})
        # zeros_like(v) and its kin: the constant, provided v's shape adds nothing to the result's
        # (checked below), so that the result has the shape torch gives it.
        tensors = [a for a in args if isinstance(a, (_Id, _Marker))]
        if tensors and all(_is_comparison(a) for a in tensors) and not _has_python_float(args):
            # (With a Python float among the operands torch promotes the bool to a float tensor:
            # (x > 0) * 0.1 is 0.1 / 0, which value() makes; with an int it is an integer tensor.)
            raise self.refuse(f"{op} of comparisons alone (a bool or integer tensor in torch; kgen's values "
                              "are floats: combine a comparison with a float value, x * (x > 0), or "
                              "convert it, (x > 0).float())")
        likes = [a.payload[1] for a in args if isinstance(a, _Marker) and a.kind == "filled"]
        if likes and all(_is_number(a) or (isinstance(a, _Marker) and a.kind == "filled") for a in args) \
                and len(set(likes)) == 1 and op in ops.POINTWISE:
            # torch.ones_like(x) * 0.5: another constant of x's shape (a number, as the IR's
            # constants are: the kernels round it to the module's dtype)
            numbers = [torch.tensor(a.payload[0] if isinstance(a, _Marker) else float(a), dtype=torch.float64)
                       for a in args]
            return _Marker("filled", (float(ops.torch_apply(op, numbers, attrs or {})), likes[0]))
        args = [a.payload[0] if isinstance(a, _Marker) and a.kind == "filled" else a for a in args]
        spread = [a.payload[1] for a in args if isinstance(a, _Marker) and a.kind == "broadcast"]
        args = [a.payload[0] if isinstance(a, _Marker) and a.kind == "broadcast" else a for a in args]
        ids = [self.value(a) for a in args]
        level = self.level(ids[0])
        shape = self.shape_of(ids[0])
        for i in ids[1:]:
            combined = combine_levels(level, self.level(i)) if level else None
            try:
                shape = broadcast_shapes(shape, self.shape_of(i))
            except ValueError as e:
                if combined is None and "pooled" in (level, self.level(i)):
                    raise self.refuse(f"{op} of a pooled (batch, P) value and a value of another "
                                      "width (kgen combines pooled values with scalars and per-row "
                                      "values)") from None
                if combined is None and "rowflat" in (level, self.level(i)):
                    raise self.refuse(f"{op} broadcasts a (M,) per-row value without keepdim against "
                                      "a value of another shape (torch broadcasts it along the "
                                      "columns); use keepdim=True") from None
                raise self.refuse(f"{op}: {e}") from None
            level = combined
        filled_shape = shape   # (the result's shape in torch: the constant's shape takes part)
        for like in likes:
            try:
                filled_shape = broadcast_shapes(filled_shape, self.shape_of(like))
            except ValueError:
                raise self.refuse(f"{op} of a zeros_like / ones_like / full_like of a value of shape "
                                  f"{shape_text(self.shape_of(like))} that the other operands, of shape "
                                  f"{shape_text(shape)}, do not broadcast to") from None
        for target in spread:
            try:
                grown = broadcast_shapes(shape, target) != shape
            except ValueError:
                grown = True
            if grown:
                raise self.refuse(f"{op} of a value expanded to the shape {shape_text(target)}, which the "
                                  f"other operands, of shape {shape_text(shape)}, do not broadcast to")
        if list(shape).count("M") > 1:
            raise self.refuse(f"{op} broadcasts a (batch,) value against a (batch, 1) one: a (batch, batch) "
                              "result (torch gives it; kgen does not: unsqueeze(1) both, or keepdim=True)")
        canonical = {"tile": ("M", self.out_features), "row": ("M", 1), "rowflat": ("M",)}
        if level in (None, "free") or (level in canonical and shape != canonical[level]):
            level = "full"   # a shape of its own: torch's broadcasting made it (ir.py)
        if op not in ops.POINTWISE:
            raise self.refuse(f"the point-wise op {op} is not in kgen's table")
        tensors = [k for k, v in (attrs or {}).items() if isinstance(v, (_Marker, _Id))]
        if tensors:
            raise self.refuse(f"{op} with a tensor as its {' and '.join(tensors)} (kgen takes numbers there; "
                              "for tensor bounds write torch.minimum / torch.maximum)")
        try:
            ops.cuda_expr(op, ["a"] * len(ids), attrs or {})
        except (ValueError, TypeError) as e:
            raise self.refuse(f"{op} with {attrs}: {e}") from None
        if attrs and ops.POINTWISE[op].arity == 1:
            # Settings torch itself refuses when the module runs (F.hardtanh(x, 1.0, -1.0): min_val
            # above max_val): a refusal here, not an error of torch's oracle in the lowering.
            try:
                ops.torch_apply(op, [torch.zeros(1, dtype=torch.float64)], attrs)
            except (ValueError, RuntimeError) as e:
                shown = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
                raise self.refuse(f"{op} with {shown}, which torch refuses too ({e})") from None
        if all(self.level(i) == "scalar" and self.nodes[i].kind == "const" for i in ids):
            # Constant folding in fp64 would differ from torch's Python-number arithmetic; fold
            # as Python does (that is what the reference computes before torch sees it).
            value = float(ops.torch_apply(op, [torch.tensor(self.nodes[i].attrs["value"], dtype=torch.float64)
                                                for i in ids], attrs or {}))
            return self._filled_broadcast(self.const(value), shape, filled_shape)
        node = self.add("pointwise", level, ids, op, **(attrs or {}))
        if level == "full":
            self.nodes[node].shape = shape
        return self._filled_broadcast(node, shape, filled_shape)

    def _filled_broadcast(self, node, shape: tuple, filled_shape: tuple):
        """The result of a point-wise op with a zeros_like / ones_like / full_like operand whose
        shape is larger than the other operands' (self.k * torch.ones_like(y), k a 0-d or per-feature
        parameter): torch's result is the op of the others, broadcast to that shape, as
        self.k.expand_as(y) is (a "broadcast" marker: the value itself as an operand of a later
        point-wise op whose result has that shape anyway)."""
        if filled_shape == shape:
            return node
        if list(filled_shape).count("M") > 1:
            raise self.refuse("a zeros_like / ones_like / full_like of a (batch,) value combined with a "
                              "(batch, 1) one: a (batch, batch) result (torch gives it; kgen does not)")
        return _Marker("broadcast", (node, filled_shape))

    def reduce(self, kind: str, x, dim, keepdim: bool, of: str | None = None) -> int:
        """`of`: the op whose part this reduction is (softmax's sum of exponentials, the norm of
        F.normalize), where torch computes it inside that op's own kernel, not as a reduction of
        its own (logsumexp's sum is torch.sum's: its reductions carry no `of`)."""
        if dim is None and kind in ("softmax", "log_softmax") and self.lead_rank:
            raise self.refuse(f"{kind} without a dim of a value of {self.lead_rank} dimensions (torch's implicit dim "
                              "is then 0, not the features; write dim=-1)")
        if dim is None and kind in ("softmax", "log_softmax"):
            dim = 1   # torch's implicit dim of a 2-d value (F._get_softmax_dim; it warns)
        dim = self._rows_dim(dim, kind)
        if isinstance(x, _Marker) and x.kind == "windows" and keepdim and kind == "mean":
            return self._group_step("mean", x.payload[0], x.payload[1], dim=dim)
        if isinstance(x, _Marker) and x.kind == "group":
            tag, v, k, eps = x.payload
            if tag == "square" and kind == "mean" and keepdim:
                return self._group_step("var", v, k, dim=dim)
            raise self._group_refusal(f"{kind} of the {tag}")
        if isinstance(x, _Marker) and x.kind == "windows":
            return self._pool_windows(kind, x, dim, keepdim)
        if isinstance(x, _Marker) and x.kind == "comparison":
            raise self.refuse(f"{kind} of a comparison (an integer count in torch; kgen's values are floats)")
        x = self.value(x)
        width = self.level(x)   # tile: N columns; pooled: P; row: a width-1 value (M, 1)
        if dim is None and kind in WHOLE_REDUCTIONS and of is None:
            return self._whole_reduction(kind, x, width, keepdim)
        if width == "full" and self._tile_input(x):
            width = "tile"
        if width == "full":
            raise self.refuse(f"{kind} of {self._not_batch_features(x)}")
        shown = of or kind   # (var's mean of squares is refused as var)
        if width not in ("tile", "pooled", "row"):
            raise self.refuse(f"{shown} over dim={dim!r} of a value of shape "
                              f"{'(M,)' if width == 'rowflat' else 'that is not (batch, features)'}; "
                              "kgen reduces over the features (dim 1) of a (batch, features) value")
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if dims not in ((1,), (-1,)):
            raise self.refuse(f"{shown} over dim={dim!r}; kgen reduces rows (dim=1 or -1)")
        if kind in ("sum", "mean", "max", "min"):
            return self.add("reduce", "row" if keepdim else "rowflat", [x], kind, **({"of": of} if of else {}))
        # The row max only shifts the exponentials out of overflow: the result does not depend
        # on it (d/dm of m + log sum exp(x - m) is exactly 0), so no gradient flows through it,
        # as in torch's own backward of softmax and logsumexp. Routing one through it would add
        # a term that is 0 in exact arithmetic and rounding noise in fp32. Over a width-1 value
        # the max is the value itself, and the rewrites fold x - max(x) to 0 (softmax to 1,
        # logsumexp to x, with exact gradients); a detach there would hide that x - x.
        mx = self.add("reduce", "row", [x], "max")
        if width != "row":
            mx = self.add("pointwise", "row", [mx], "detach")
            if kind == "logsumexp":   # (softmax's and log_softmax's rows of -inf are NaN in torch too)
                mx = self.add("pointwise", "row", [mx], "zero_if_inf")
        shifted = self.add("pointwise", width, [x, mx], "sub")
        e = self.add("pointwise", width, [shifted], "exp")
        total = self.add("reduce", "row", [e], "sum", **({} if kind == "logsumexp" else {"of": kind}))
        if kind == "softmax":
            return self.add("pointwise", width, [e, total], "div")
        log_total = self.add("pointwise", "row", [total], "log")
        if kind == "log_softmax":
            return self.add("pointwise", width, [shifted, log_total], "sub")
        assert kind == "logsumexp"
        return self.add("pointwise", "row" if keepdim else "rowflat", [mx, log_total], "add")

    def _feeds_the_output_only(self) -> bool:
        """Whether the fx node being visited is the module's output and used nowhere else."""
        users = list(self.fx_node.users)
        return len(users) == 1 and users[0].op == "output"

    def _tail(self, method: str, args: tuple = ()) -> None:
        """torch's x.`method`(*args) on the kernel's output, the module's last op (Graph.output_tail;
        "M" in args: the batch)."""
        if self.output_tail:
            raise self.refuse(f"a second op after the kernel's output (.{self.output_tail[0]}() and .{method}()); "
                              "kgen takes one as the module's last op")
        self.output_tail = (method, *self.where, tuple(args))

    def _output_view(self, x, method: str, args: tuple):
        """x.`method`(*args) of the module's output to a shape kgen's values do not take (a view of
        more dims, x.view(-1)): the kernels compute x, and torch's own view of it is the forward's
        last op, as in the reference (Graph.output_tail)."""
        self._tail(method, args)
        return x

    def _whole_reduction(self, kind: str, x: int, width: str, keepdim: bool) -> int:
        """A sum / mean / max / min over every element (dim=None) as the module's last op: the
        kernel's per-row values (the row's reduction over the features, or the per-row value
        itself), and torch's reduction of those M values after it (Graph.output_tail): the same
        number (a mean of the rows' means is the mean: every row has N elements)."""
        if keepdim:
            raise self.refuse(f"{kind} over every element (dim=None) with keepdim=True; kgen reduces over "
                              f"the features (dim 1), and takes x.{kind}() of everything as the forward's last op")
        if not self._feeds_the_output_only():
            raise self.refuse(f"{kind} over every element (dim=None) other than as the module's output; kgen "
                              f"reduces over the features (dim 1), and takes x.{kind}() of everything as the "
                              "forward's last op")
        if width not in ("tile", "pooled", "row", "rowflat"):
            raise self.refuse(f"{kind} over every element of a value that is not (batch, features)")
        self._tail(WHOLE_REDUCTIONS[kind])
        if width in ("row", "rowflat"):
            return x
        if kind in ("sum", "mean"):
            # torch accumulates every element of a 16-bit value in float32 and rounds once (CUDA's
            # reduce_kernel with acc_t float, as CPU's): the rows' sums stay float32 (a to_opmath
            # value: the kernels write them so, lower.forward's fp32_output) and the tail's result is
            # rounded (Graph.tail_rounds). Rounding each row's first was up to ~M / 2 steps of the
            # rows' sums off where they cancel. (max and min: rounding is monotonic, the same.)
            x, self.tail_rounds = self._internal_upcast(x)
        return self.add("reduce", "rowflat", [x], kind)

    # ---- GroupNorm written out over a (batch, G, k) view ------------------------------------
    # g = x.view(b, G, -1); (g - g.mean(-1, keepdim=True)) / torch.sqrt(g.var(-1, keepdim=True,
    # unbiased=False) + eps) (or the variance as ((g - mean) ** 2).mean(-1, keepdim=True), or
    # * torch.rsqrt(var + eps)), viewed back to (b, N): F.group_norm(x, G, eps=eps), one node. Each
    # step is a _Marker("group", (step, x, k, eps)); any other use is refused by name.
    def _group_refusal(self, what: str) -> Unsupported:
        return self.refuse(f"a (batch, G, k) view's {what}: kgen takes a GroupNorm written out as "
                           "g = x.view(b, G, -1); (g - g.mean(-1, keepdim=True)) / torch.sqrt(g.var(-1, "
                           "keepdim=True, unbiased=False) + eps), viewed back to (b, N) (or nn.GroupNorm)")

    def _group_step(self, tag: str, x: int, k: int, eps=None, dim=-1) -> _Marker:
        if dim not in (-1, 2, (-1,), (2,), [-1], [2]):
            raise self._group_refusal(f"{tag} over dim={dim!r}")
        return _Marker("group", (tag, x, k, eps))

    def _group_pointwise(self, op: str, args: list, attrs: dict) -> _Marker:
        kinds = [(a.kind, a.payload[0] if a.kind == "group" else None) if isinstance(a, _Marker) else
                 ("number" if _is_number(a) else "value", None) for a in args]
        g = next(a for a in args if isinstance(a, _Marker) and a.kind in ("group", "windows"))
        x, k = g.payload[1:3] if g.kind == "group" else g.payload
        eps = next((a.payload[3] for a in args if isinstance(a, _Marker) and a.kind == "group"
                    and a.payload[3] is not None), None)
        same = all(not isinstance(a, _Marker) or a.kind not in ("group", "windows")
                   or (a.payload[1:3] if a.kind == "group" else a.payload) == (x, k) for a in args)
        step = None
        if same and op == "sub" and kinds == [("windows", None), ("group", "mean")]:
            step = "centered"
        elif same and op == "pow" and kinds == [("group", "centered")] and attrs.get("exponent") == 2.0:
            step = "square"
        elif same and op == "mul" and kinds == [("group", "centered")] * 2:
            step = "square"
        elif op == "add" and sorted(kinds) == [("group", "var"), ("number", None)]:
            step, eps = "var_eps", next(a for a in args if _is_number(a))
        elif op == "sqrt" and kinds == [("group", "var_eps")]:
            step = "std"
        elif op == "rsqrt" and kinds == [("group", "var_eps")]:
            step = "rstd"
        elif op == "div" and kinds == [("number", None), ("group", "std")] and args[0] == 1:
            step = "rstd"
        elif same and op == "div" and kinds == [("group", "centered"), ("group", "std")]:
            step = "normed"
        elif same and op == "mul" and sorted(kinds) == [("group", "centered"), ("group", "rstd")]:
            step = "normed"
        if step is None:
            raise self._group_refusal(f"{op} of {', '.join(s or kind for kind, s in kinds)}")
        return _Marker("group", (step, x, k, eps))

    def _group_back(self, g: _Marker) -> int:
        tag, x, k, eps = g.payload
        if tag != "normed":
            raise self._group_refusal(f"{tag} viewed back to (batch, features)")
        return self.group_norm(x, self.shape_of(x)[1] // k, None, None, eps, None)

    def _pool_windows(self, kind: str, windows: _Marker, dim, keepdim: bool):
        """x.view(batch, P, k).amax(-1) / .mean(-1): 1-d pooling by hand, windows of k features
        side by side (MaxPool1d / AvgPool1d with kernel and stride k, as torch pools them)."""
        x, k = windows.payload
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if kind not in ("max", "mean") or dims not in ((2,), (-1,)) or keepdim:
            per_group = (f"; a {kind} of each group of {k} features (a per-head {kind}) is not taken: kgen's "
                         f"{kind} runs over a row's features, its GroupNorm over groups of them (written out: "
                         "g.mean(-1, keepdim=True), g.var(-1, keepdim=True, unbiased=False))"
                         if kind in ("softmax", "log_softmax", "logsumexp", "sum", "max", "min") and dims in ((2,), (-1,)) else "")
            raise self.refuse(f"{kind} over dim={dim!r}{', keepdim' if keepdim else ''} of a (batch, P, {k}) view "
                              f"(kgen takes its max or mean over the last dim without keepdim: 1-d pooling){per_group}")
        return self.pool("max" if kind == "max" else "avg", _Marker("unsqueezed", x), k, k, 0, False).payload

    def group_norm(self, x, groups, weight: str | None, bias: str | None, eps, channels,
                   what: str = "GroupNorm", affine_fp32: bool = False) -> int:
        """GroupNorm over the N features of each row: G groups of N / G consecutive columns,
        normalized with the group's mean and biased variance, then the per-column affine.
        `affine_fp32`: the weight and bias given upcast (F.layer_norm(h, ..., self.weight.float()),
        Tracer._affine_paths)."""
        if self.lead_rank and what == "GroupNorm":
            raise self.refuse(f"{what} of a value of {self.lead_rank} dimensions, the input's leading sizes first "
                              "(torch's channels are then its dimension 1, not the features)")
        x = self.value(x)
        n = self.out_features
        if self.level(x) != "tile" and not self._tile_input(x):
            raise self.refuse(f"{what} of {self._not_batch_features(x)}")
        if not isinstance(groups, int) or groups < 1 or n % groups:
            raise self.refuse(f"{what} with {groups!r} groups of {n} features (torch needs a divisor)")
        if channels is not None and channels != n:
            raise self.refuse(f"{what} over {channels} channels after a GEMM of {n} features")
        if not _is_number(eps):
            raise self.refuse(f"{what} with an eps that is not a number")
        args = [x]
        for path in (weight, bias):
            if path is not None:
                p = self.param(path)
                if self.level(p) != "col":
                    raise self.refuse(f"{what}'s {path} is not a per-feature (N,) parameter")
                args.append(p)
        # (affine_fp32: the oracle casts the parameters so; the kernels read every parameter
        # into fp32 registers anyway)
        if not affine_fp32:
            self._refuse_16_bit_parameters_on_fp32(x, what, [self._tensor(self.nodes[a].attrs["path"]) for a in args[1:]])
        # (layer: a LayerNorm, whose 16-bit statistics torch keeps in fp32: forward._stats_pass_branches.)
        layer = {"layer": True} if what in ("LayerNorm", "InstanceNorm1d") else {}
        return self.add("groupnorm", "tile", args, groups=groups, eps=float(eps),
                        weight=weight is not None, bias=bias is not None, **layer,
                        **({"affine_fp32": True} if affine_fp32 and len(args) > 1 else {}))

    def layer_norm(self, x, normalized_shape: tuple, weight, bias, eps, affine_fp32: bool = False) -> int:
        """LayerNorm over the N features of each row: GroupNorm with one group (the same mean,
        biased variance, eps and per-feature affine; one kernel path, one backward)."""
        if isinstance(x, _Id) and self.level(x) == "pooled":
            return self._pooled_layer_norm(x, normalized_shape, weight, bias, eps, affine_fp32)
        if isinstance(x, _Marker) and x.kind == "windows":
            groups, k = self.shape_of(x.payload[0])[1] // x.payload[1], x.payload[1]
            raise self.refuse(f"LayerNorm over {tuple(normalized_shape)} of a (batch, {groups}, {k}) view (a LayerNorm "
                              f"per group of {k} features): write F.group_norm(h.reshape(-1, {groups * k}), {groups}, "
                              "eps=eps) of its rows, the same normalization (torch's GroupNorm rounds its statistics "
                              "to a 16-bit module's dtype, LayerNorm keeps them in fp32), with any affine after it")
        if normalized_shape != (self.out_features,):
            whole = len(normalized_shape) == 1 and isinstance(normalized_shape[0], _Marker)
            shown = ("the value's whole shape (y.shape: one mean and variance over the batch too)" if whole
                     else normalized_shape)
            raise self.refuse(f"LayerNorm over {shown} after a GEMM of {self.out_features} "
                              "features (kgen normalizes each row's features: normalized_shape (N,))")
        if self.out_features == 1:
            raise self.refuse("LayerNorm over one feature (its output is its bias alone: x minus its own "
                              "mean is 0)")
        return self.group_norm(x, 1, weight or None, bias or None, eps, None, what="LayerNorm",
                               affine_fp32=affine_fp32)

    def _pooled_layer_norm(self, x: int, normalized_shape: tuple, weight, bias, eps, affine_fp32: bool) -> int:
        """LayerNorm of a pooled value (the gate of GLU's halves, a pooling) over its P columns:
        the groupnorm node's row pass runs over the GEMM's N columns, so it is written out with row
        reductions, as RMSNorm of one is: (x - mean) rsqrt(var + eps) w + b, the mean and the
        biased variance of the row (two passes), all of it in float32 and rounded once in a
        16-bit module, as torch's LayerNorm kernel computes its statistics and its affine output
        in its accumulate type (T_ACC) and rounds once (Tracer._internal_upcast)."""
        width = self.shape_of(x)[1]
        if tuple(normalized_shape) != (width,):
            raise self.refuse(f"LayerNorm over {tuple(normalized_shape)} of a pooled value of {width} features "
                              f"(kgen normalizes each row's features: normalized_shape ({width},))")
        if not _is_number(eps):
            raise self.refuse("LayerNorm with an eps that is not a number")
        if width == 1:
            raise self.refuse("LayerNorm over one feature (its output is its bias alone: x minus its own mean is 0)")
        if not affine_fp32:
            self._refuse_16_bit_parameters_on_fp32(x, "LayerNorm", [self._tensor(p) for p in (weight, bias) if p])
        h, upcast = self._internal_upcast(x)
        centered = self.pointwise("sub", [h, self.reduce("mean", h, -1, True)])
        variance = self.reduce("mean", self.pointwise("mul", [centered, centered]), -1, True)
        y = self.pointwise("mul", [centered, self.pointwise("rsqrt", [self.pointwise("add", [variance, float(eps)])])])
        for op, path in (("mul", weight), ("add", bias)):
            if path:
                y = self.pointwise(op, [y, self.attribute(path)])
        return self._internal_cast_back(y, upcast)

    def instance_norm(self, a: dict, what: str, unbatched: bool = False):
        """InstanceNorm of x.unsqueeze(1), a (batch, 1, features) value: each (sample, channel)
        normalized over its length, here each row over its N features with the row's mean and
        biased variance and eps, as LayerNorm without affine computes it (torch's instance_norm
        is batch_norm of the (1, batch, N) view in training mode: fp32 statistics in a 16-bit
        module, as LayerNorm's; the LayerNorm node). `unbatched`: nn.InstanceNorm1d of the
        (batch, features) value itself, which torch takes as one sample of `batch` channels
        (C, L): the same normalization of each row. Refused: running statistics (their update
        averages the instances' statistics over the batch, and eval mode normalizes with them)
        and, of the (batch, features) value itself, the affine weight and bias (one number per
        row, its channels). Of x.unsqueeze(1), one channel: the affine weight and bias are one
        number each, applied in float32 with the normalization and rounded once in a 16-bit
        module, as torch's batch_norm kernel computes (x - mean) * invstd * w + b in its
        accumulate type (the LayerNorm node of the upcast value, then the scale and shift:
        Tracer._internal_upcast)."""
        x = a["input"]
        if not unbatched and not (isinstance(x, _Marker) and x.kind == "unsqueezed"):
            raise self.refuse(f"{what} of a value that is not x.unsqueeze(1) of a (batch, features) value (kgen "
                              "takes it as the normalization of each row's features: InstanceNorm1d of (batch, 1, N))")
        if a["running_mean"] is not None or a["running_var"] is not None or not a["use_input_stats"]:
            raise self.refuse(f"{what} with running statistics (track_running_stats=True: their update averages "
                              "the instances' statistics over the batch, and eval mode normalizes with them, "
                              "which kgen does not keep); kgen takes track_running_stats=False, the default")
        affine = [(op, a[name]) for op, name in (("mul", "weight"), ("add", "bias")) if a[name] is not None]
        if affine and unbatched:
            raise self.refuse(f"{what} of the (batch, features) value itself with affine=True: torch takes it as "
                              "one sample of `batch` channels, a weight and a bias per row; kgen takes affine=True "
                              "of x.unsqueeze(1), one channel (InstanceNorm1d(1, affine=True))")
        if self.out_features == 1:
            raise self.refuse(f"{what} over one feature (torch raises: it needs more than one element to normalize)")
        h, upcast = self._internal_upcast(x if unbatched else x.payload) if affine else (x if unbatched else x.payload, False)
        y = self.group_norm(h, 1, None, None, a["eps"], None, what="InstanceNorm1d")
        for op, p in affine:
            p = self.value(p)
            if self.level(p) != "scalar":
                raise self.refuse(f"{what}'s affine {'weight' if op == 'mul' else 'bias'} of {self.shape_of(p)}: of "
                                  "x.unsqueeze(1), one channel, it is one number")
            y = self.pointwise(op, [y, p])
        y = self._internal_cast_back(y, upcast)
        return y if unbatched else _Marker("unsqueezed", y)

    def instance_norm_module(self, x, path: str, module: nn.Module):
        """nn.InstanceNorm1d (Tracer.instance_norm) of x.unsqueeze(1), or of the (batch, features)
        value itself (torch's unbatched (C, L): the same rows normalized)."""
        unbatched = isinstance(x, _Id) and self.level(x) == "tile"
        tracks = module.track_running_stats
        a = {"input": x, "running_mean": module.running_mean if tracks else None,
             "running_var": module.running_var if tracks else None,
             "weight": self.attribute(f"{path}.weight") if module.affine else None,
             "bias": self.attribute(f"{path}.bias") if module.affine else None,
             "use_input_stats": module.training or not tracks, "eps": module.eps}
        return self.instance_norm(a, f"self.{path} (InstanceNorm1d)", unbatched)

    def rms_norm(self, x, normalized_shape: tuple, weight: str | None, eps) -> int:
        """RMSNorm over the N features of each row, as ATen's rms_norm writes it: x rsqrt(mean(x^2)
        + eps), times the weight; eps None is float32's epsilon (ATen's opmath epsilon)."""
        # (of a pooled value, GLU's halves or a pooling: over its P features, a (P,) weight)
        width = self.shape_of(x)[1] if isinstance(x, _Id) and self.level(x) == "pooled" else self.out_features
        if tuple(normalized_shape) != (width,):
            of = f"a pooled value of {width}" if width != self.out_features else f"after a GEMM of {width}"
            raise self.refuse(f"RMSNorm over {tuple(normalized_shape)} {of} "
                              "features (kgen normalizes each row's features: normalized_shape (N,))")
        eps = torch.finfo(torch.float32).eps if eps is None else eps
        if not _is_number(eps):
            raise self.refuse(f"RMSNorm with eps={eps!r}")
        h, upcast = self._internal_upcast(x)   # (ATen's rms_norm upcasts a 16-bit input)
        mean_square = self.reduce("mean", self.pointwise("mul", [h, h]), -1, True)
        y = self.pointwise("mul", [h, self.pointwise("rsqrt", [self.pointwise("add", [mean_square, float(eps)])])])
        y = self._internal_cast_back(y, upcast)
        return y if weight is None else self.pointwise("mul", [y, self.attribute(weight)])

    def _internal_upcast(self, x) -> tuple:
        """x in float32 for a reduction torch computes in its math type, float32, on a 16-bit
        input and rounds once at its end (torch.var / std and their _mean forms, the 2-norm,
        ATen's rms_norm), and whether it was cast: a to_opmath node (Node.fp32; the identity in
        the kernels, float32 in the oracle for a 16-bit x and x itself in float64), so that a
        16-bit build rounds none of the steps kgen writes the reduction with. Rounded at each
        step, (x - mean)^2 and x^2 overflowed fp16 from |x| > 256 (a variance of inf, a norm of
        inf: y / y.norm() was 0), and bf16's steps were several of eager's roundings off. A value
        already in float32 (an upcast of the forward's) is itself."""
        x = self.value(x)
        if self.nodes[x].fp32:
            return x, False
        return self.pointwise("to_opmath", [x]), True

    def _opmath_kernel(self, operands: list, others: list) -> tuple[list, bool]:
        """The operands of one of ATen's CUDA kernels that compute in torch's math type and round
        once (`a + alpha * b` of add / sub with alpha, `a + value * (b * c)` of addcmul, `a + value
        * (b / c)` of addcdiv: their 16-bit operands read as float32, opmath_t / accscalar_t),
        where kgen writes the kernel with several ops: `operands`, those of its first op, with one
        tensor among them upcast (a to_opmath node, Tracer._internal_upcast) so that every op
        after it is in float32 (Node.fp32) and a 16-bit build rounds none of them; `others`, the
        kernel's other operands (the `a` they are added to). Also whether the result is to be
        cast back to the module's dtype: where no operand was in float32 already (an upcast of
        the forward's makes eager's result float32). Rounded at each step, a * b was a step off
        eager's on a sixth of a bf16 module's elements."""
        held = any(isinstance(v, _Id) and self.nodes[v].fp32 for v in (*operands, *others))
        if any(isinstance(v, _Id) and self.nodes[v].fp32 for v in operands):
            return list(operands), False
        # (a traced value rather than a parameter where there is one: to_opmath of a parameter is
        # a per-feature value computed from it, which a backward after a reduction does not take)
        at = next((i for i, v in enumerate(operands) if isinstance(v, _Id)),
                  next((i for i, v in enumerate(operands) if not _is_number(v)), None))
        if at is None:
            return list(operands), False
        upcast = list(operands)
        upcast[at], cast = self._internal_upcast(operands[at])
        return upcast, cast and not held

    def _internal_cast_back(self, v, upcast: bool):
        """The result of a reduction _internal_upcast cast, back in the module's dtype (rounded
        once there, as torch's kernel writes its output)."""
        return self.pointwise("to_module_dtype", [v]) if upcast else v

    def normalize(self, x, p, dim, eps) -> int:
        """F.normalize(x, p, dim=1): x / max(||x||_p, eps) over each row's features, as torch
        computes it (the norm, clamped below, then a division); p = 2, 1 or inf."""
        dim = self._rows_dim(dim, "F.normalize")
        if dim not in (1, -1):
            raise self.refuse(f"F.normalize with dim={dim!r} (kgen takes dim 1)")
        if self.level(self.value(x)) not in ("tile", "pooled") and not self._tile_input(self.value(x)):
            raise self.refuse(f"F.normalize of {self._not_batch_features(self.value(x))}")
        if p == 2:   # (the norm in float32 inside, rounded once: Tracer._internal_upcast)
            h, upcast = self._internal_upcast(x)
            squares = self.pointwise("pow", [h], {"exponent": 2.0})
            norm = self.pointwise("norm_sqrt", [self.reduce("sum", squares, -1, True, of="normalize")])
            norm = self._internal_cast_back(norm, upcast)
        else:   # p = 1, inf: torch's input.norm(p, dim, keepdim=True)
            norm = self.norm(x, p, dim, True)
        return self.pointwise("div", [x, self.pointwise("maximum_const", [norm], {"other": float(eps)})])

    def _row_width(self, x: int) -> int:
        """The number of elements a row reduction of x sums."""
        return {"tile": self.out_features, "row": 1}.get(self.level(x)) or self.shape_of(x)[1]

    def variance(self, what: str, x, dim, correction, keepdim: bool):
        """torch.var / std (and var_mean, std_mean) over the features: the squared deviations
        from the row mean, summed, over (count - correction). Two passes, as exact as torch's
        Welford; the mean is detached inside, as its gradient there is 0 in exact arithmetic
        (sum(x - mean) = 0) and rounding noise in fp32."""
        dim = self._rows_dim(dim, what)
        if not _is_number(correction):
            raise self.refuse(f"{what} with correction={correction!r}")
        if dim is None:
            raise self.refuse(f"{what} over every element (dim=None); kgen reduces over the features (dim 1) "
                              "(and takes a sum, mean, max or min of everything as the forward's last op)")
        if isinstance(x, _Marker) and x.kind == "windows":
            if what != "var" or correction != 0 or not keepdim:
                raise self._group_refusal(f"{what} with correction={correction!r}, keepdim={keepdim!r}")
            return self._group_step("var", x.payload[0], x.payload[1], dim=dim)
        if (tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)) not in ((1,), (-1,)):
            raise self.refuse(f"{what} over dim={dim!r}; kgen reduces rows (dim=1 or -1)")   # (not its mean's)
        count = self._row_width(self.value(x)) - correction
        if count <= 0:
            raise self.refuse(f"{what} of {self._row_width(self.value(x))} elements with correction "
                              f"{correction:g} (no degrees of freedom; torch gives NaN or inf)")
        x, upcast = self._internal_upcast(x)   # (torch's Welford runs in float32: rounded once)
        mean = self.reduce("mean", x, dim, True)
        deviation = self.pointwise("sub", [x, self.pointwise("detach", [mean])])
        squares = self.pointwise("mul", [deviation, deviation])
        var = self.pointwise("div", [self.reduce("sum", squares, dim, keepdim, of="var"), float(count)])
        result = self._internal_cast_back(self.pointwise("norm_sqrt", [var]) if what.startswith("std") else var,
                                          upcast)
        if what.endswith("_mean"):
            mean = self._internal_cast_back(mean, upcast)
            return _Marker("pair", (result, mean if keepdim else self._relevel(mean, "rowflat")))
        return result

    def norm(self, x, p, dim, keepdim: bool):
        """torch.norm / x.norm / torch.linalg.vector_norm over the features: p = 2 ('fro'), 1 or
        inf, as torch defines them (the 2-norm's sum inside the norm's own kernel in torch)."""
        dim = self._rows_dim(dim, "norm")
        if p in ("fro", 2, 2.0):   # (in float32 inside, rounded once: Tracer._internal_upcast)
            h, upcast = self._internal_upcast(x)
            squares = self.pointwise("pow", [h], {"exponent": 2.0})
            return self._internal_cast_back(
                self.pointwise("norm_sqrt", [self.reduce("sum", squares, dim, keepdim, of="norm")]), upcast)
        if p in (1, 1.0):
            return self.reduce("sum", self.pointwise("abs", [x]), dim, keepdim, of="norm")
        if p == float("inf"):
            return self.reduce("max", self.pointwise("abs", [x]), dim, keepdim)
        raise self.refuse(f"a norm with p={p!r} (kgen takes p = 2, 'fro', 1 and inf)")

    def pool(self, op: str, x, kernel_size, stride, padding, ceil_mode, dilation=1,
             return_indices=False) -> _Marker:
        """MaxPool1d / AvgPool1d of x.unsqueeze(1): a pooled value, still (batch, 1, P). Of a
        (batch, features) value itself: torch takes a 2-d input as one unbatched sample (C, L), so
        it pools each row's features the same way, the pooled value (batch, P)."""
        name = {"max": "MaxPool1d", "avg": "AvgPool1d"}[op]
        unbatched = isinstance(x, _Id) and self.level(x) == "tile"
        if unbatched:
            x = _Marker("unsqueezed", x)
        if isinstance(x, _Id) and self.level(x) == "pooled":
            raise self.refuse(f"{name} of a pooled value: a second pooling (kgen supports one pooling per module)")
        if not (isinstance(x, _Marker) and x.kind == "unsqueezed"):
            raise self.refuse(f"{name} of a value that is not a (batch, features) value or its x.unsqueeze(1) "
                              "(kgen pools over the features)")
        if self.level(x.payload) != "tile" or any(n.kind == "pool" for n in self.nodes):
            raise self.refuse(f"{name} of a value that is not (batch, features) of the GEMM's width "
                              "(kgen supports one pooling per module)")
        if any(n.kind == "half" for n in self.nodes):
            raise self.refuse(f"{name} in a part that halves a value (GLU, chunk): kgen takes halves or "
                              "one pooling between two GEMMs, not both")

        def one(v, what):
            v = v[0] if isinstance(v, (tuple, list)) and len(v) == 1 else v
            if isinstance(v, (bool, _Id)) or not isinstance(v, int) or v < 1:
                raise self.refuse(f"{name} with {what}={v!r} (kgen takes a positive integer)")
            return v

        k = one(kernel_size, "kernel_size")
        s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else one(stride, "stride")
        for what, value, want in (("padding", padding, 0), ("dilation", dilation, 1),
                                  ("ceil_mode", ceil_mode, False), ("return_indices", return_indices, False)):
            value = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
            if value != want:
                raise self.refuse(f"{name} with {what}={value!r} (kgen supports {what}={want!r})")
        if k > self.out_features:
            raise self.refuse(f"{name} with kernel_size {k} over {self.out_features} features")
        pooled = self.add("pool", "pooled", [x.payload], op, kernel=k, stride=s)
        return pooled if unbatched else _Marker("unsqueezed", pooled)

    def adaptive_pool(self, op: str, x, output_size, return_indices) -> _Marker:
        """AdaptiveAvgPool1d / AdaptiveMaxPool1d of x.unsqueeze(1) to L outputs, L dividing the
        features N: torch's windows are then [i N / L, (i + 1) N / L), the pooling of kernel and
        stride N / L (L = 1: the mean or max of each row, as a global pooling writes it)."""
        name = {"max": "AdaptiveMaxPool1d", "avg": "AdaptiveAvgPool1d"}[op]
        size = output_size[0] if isinstance(output_size, (tuple, list)) and len(output_size) == 1 else output_size
        if isinstance(size, (bool, _Id)) or not isinstance(size, int) or size < 1:
            raise self.refuse(f"{name} with output_size={output_size!r} (kgen takes a positive integer)")
        n = self.out_features
        if n is None or n % size:
            raise self.refuse(f"{name} to {size} outputs of {n} features, whose windows differ in size (kgen takes "
                              "an output size that divides the features: the pooling of kernel features // size)")
        return self.pool(op, x, n // size, n // size, 0, False, 1, return_indices)

    def _halves_dim(self, x, dim, what: str) -> int:
        """The value x, checked to be one kgen halves over dim (its features: 1 or -1) and of an even
        width; its node id."""
        x = self.value(x)
        if self.level(x) != "tile":
            raise self.refuse(f"{what} of {LEVEL_WORDS.get(self.level(x), 'a value')}; kgen halves a "
                              "(batch, features) value of the GEMM's width (GLU's two halves)")
        if isinstance(dim, (bool, _Id)) or dim not in (1, -1):
            raise self.refuse(f"{what} over dim={dim!r}; kgen halves the features (dim=-1 or 1)")
        if self.out_features % 2:
            raise self.refuse(f"{what} of {self.out_features} features, an odd number: the two chunks differ "
                              "in width (kgen takes halves of an even width)")
        if any(n.kind == "pool" for n in self.nodes):
            raise self.refuse(f"{what} in a part with a pooling: kgen takes halves or one pooling between "
                              "two GEMMs, not both")
        return x

    def half(self, x: int, c: int) -> int:
        """Columns [c N/2, (c + 1) N/2) of tile value x: a pooled value of width N / 2 (one node per
        half of a value: chunking it twice gives the same two)."""
        for n in self.nodes:
            if n.kind == "half" and n.args == (x,) and n.attrs["half"] == c:
                return _Id(n.id)
        return self.add("half", "pooled", [x], half=c)

    def halves(self, x, dim, what: str) -> _Marker:
        """Both halves of x over its features (chunk(2, -1), split(N / 2, -1)): a pair of values,
        unpacked by index (a, b = ...; h.chunk(2, -1)[1])."""
        x = self._halves_dim(x, dim, what)
        return _Marker("halves", (self.half(x, 0), self.half(x, 1)))

    def chunk(self, x, chunks, dim) -> _Marker:
        if isinstance(chunks, (bool, _Id)) or chunks != 2:
            raise self.refuse(f"chunk({chunks!r}) of a value; kgen takes chunk(2, dim=-1), GLU's two halves")
        return self.halves(x, dim, "chunk(2)")

    def split(self, x, size, dim) -> _Marker:
        """x.split(N / 2, -1) or x.split([N / 2, N / 2], -1): the two halves."""
        half = self.out_features // 2
        sizes = list(size) if isinstance(size, (tuple, list)) else None
        if not (sizes == [half, half] or (sizes is None and not isinstance(size, (bool, _Id)) and size == half)) \
                or self.out_features % 2:
            raise self.refuse(f"split({size!r}) of {self.out_features} features; kgen takes a split into two "
                              f"halves (split({half}, dim=-1), GLU's)")
        self.sizes_read.append(self.where)   # (half N as a number: the file runs at this N only)
        return self.halves(x, dim, f"split({size!r})")

    def glu(self, x, dim) -> int:
        """F.glu / nn.GLU: a * sigmoid(b), a and b the first and second half over dim (torch's glu),
        in float32 and rounded once in a 16-bit module, as torch's glu kernels compute it (CUDA's
        ActivationGluKernel.cu: a and b in opmath_t, a * (1 / (1 + exp(-b))) returned as scalar_t;
        rounded at each step, a bf16 GLU before a norm was 1.5x eager's error on the GPU)."""
        a, b = self.halves(x, dim, "GLU").payload
        a, upcast = self._internal_upcast(a)
        b, _ = self._internal_upcast(b)
        return self._internal_cast_back(self.pointwise("mul", [a, self.pointwise("sigmoid", [b])]), upcast)

    def half_of_range(self, x: int, start: int, stop: int) -> int | None:
        """The half of tile value x that columns [start, stop) are, as Python's slice of the
        features takes them (None: not a half)."""
        n = self.out_features
        if self.level(x) != "tile" or n % 2 or any(p.kind == "pool" for p in self.nodes):
            return None
        return {(0, n // 2): 0, (n // 2, n): 1}.get((start, stop))

    def dropout(self, x, p, active: bool, path: str):
        """Dropout is the identity in eval mode. An active one (p > 0) of an (M, N) value becomes
        mul(x, mask) with a `mask` node (ir.py): in training mode the emitted forward draws the
        mask with torch (F.dropout of ones, the RNG consumed as the reference's dropout consumes
        it) and the kernels multiply by it, in eval mode the mask is 1. Every active one is
        recorded (`reproduced`: it has a mask node; one of another value is not reproduced and the
        emitted forward refuses training mode: the Dropout module at `path` training, or for
        F.dropout, whose flag the trace sees only as a bool, any module of the model training).
        trace() refuses one active in eval mode."""
        if not _is_number(p):
            raise self.refuse(f"dropout with p={p!r}")
        if p == 0 or not active or self.dropout_is_identity:
            return x
        if isinstance(x, _Marker) and x.kind == "input" and self.in_prologue():
            x = self.value(x)   # (a classifier head's dropout of its input: the prologue's mask)
        if isinstance(x, _Id) and self.nodes[x].fp32 and self.ref.input.dtype != torch.float32:
            # (torch's mask of a float32 tensor may not be the one the file draws in the module's dtype)
            raise self.refuse("an active dropout of a value in float32 (after the forward's upcast) in a "
                              f"{self.ref.input.dtype} module: kgen draws its mask in the module's dtype; apply it "
                              "after the cast back")
        record = self._drawn_in_training(f"Dropout(p={p:g})", path, "a dropout of a value other than (batch, features)",
                                         "the identity", p=float(p))
        if isinstance(x, _Id) and self.level(x) == "tile" and p < 1:
            record["reproduced"] = True
            mask = self.add("mask", "tile", path=f"<dropout {len(self.dropouts) - 1}>", p=float(p),
                            module=path)
            return self.add("pointwise", "tile", [x, mask], "mul")
        return x

    def _drawn_in_training(self, name: str, path: str, why: str, in_eval: str, p: float | None = None) -> dict:
        """Records an op the forward draws at random with (a dropout, RReLU's slopes) as one of
        graph.dropouts, not reproduced until the caller says so: the emitted forward then raises
        in training mode, naming it (`name`), that kgen does not draw as torch does (`why`) and
        what it is in eval mode (`in_eval`); trace() refuses one active in eval mode."""
        record = {"path": path, "p": p, "line": self.where[0], "text": self.where[1], "reproduced": False,
                  "name": name, "why": why, "in_eval": in_eval}
        self.dropouts.append(record)
        return record

    def alpha_dropout(self, x, p, active: bool, path: str, feature: bool):
        """AlphaDropout / FeatureAlphaDropout (and F.alpha_dropout / F.feature_alpha_dropout): the
        identity in eval mode, as torch's; in training mode it draws a mask and moves the kept
        values by an affine map that keeps SELU's mean and variance, which kgen does not
        reproduce: the emitted forward refuses training mode (Tracer._drawn_in_training)."""
        name = "FeatureAlphaDropout" if feature else "AlphaDropout"
        if not _is_number(p):
            raise self.refuse(f"{name} with p={p!r}")
        if p == 0 or not active or self.dropout_is_identity:
            return x
        self._drawn_in_training(f"{name}(p={p:g})", path, f"torch's {name} mask and its affine correction",
                                "the identity", p=float(p))
        return x

    def rrelu(self, x, lower, upper, active: bool, path: str):
        """RReLU (nn.RReLU, F.rrelu): in eval mode ATen's leaky_relu of slope (lower + upper) / 2
        (computed in double, as ATen's rrelu_with_noise does), its gradient leaky_relu's; in
        training mode each negative element's slope is drawn from U(lower, upper), which kgen does
        not reproduce: the eval-mode IR, and the emitted forward refuses training mode."""
        if not (_is_number(lower) and _is_number(upper)) or lower > upper:
            raise self.refuse(f"RReLU with lower={lower!r}, upper={upper!r} (kgen takes numbers, lower <= upper)")
        slope = (float(lower) + float(upper)) / 2
        y = self.pointwise("leaky_relu", [x], {"negative_slope": slope})
        if active and not self.dropout_is_identity:
            self._drawn_in_training(f"RReLU(lower={lower:g}, upper={upper:g})", path,
                                    "the slope of each negative element, drawn from U(lower, upper)",
                                    f"leaky_relu with the slope (lower + upper) / 2 = {slope:g}")
        return y

    def gemm(self, x, weight: "str | WeightExpr", bias_path: str | None, stored_kn: bool = False) -> int:
        """The GEMM x Wᵀ of W at `weight`, stored (N, K) (nn.Linear's layout), or, `stored_kn`,
        x W of W stored (K, N) (node attribute stored_kn: graph.gemm_weight reads it (N, K)).
        The same GEMM of the module's input again (`F.selu(self.fc(x)) + F.hardsigmoid(self.fc(x))`)
        is the value the first one gave."""
        call = (weight, bias_path, stored_kn) if isinstance(weight, str) and self._side_by_side_source(x) else None
        if call is not None and call in self.side_by_side:
            if self.in_prologue() and isinstance(x, _Id):
                self.chain(x)   # (the first Linear of the prologue's output closes the prologue)
            return self.half(self.side_by_side_gemm(), self.side_by_side.index(call))
        if call is not None and self.first_gemm is not None and self.first_gemm[0] == call:
            return self.first_gemm[1]
        if call is not None and self.first_gemm is not None and self.first_gemm[0] is not None and \
                (call[0], call[2]) == (self.first_gemm[0][0], self.first_gemm[0][2]):
            # The same weight with another bias or none (F.linear(x, W, b) and F.linear(x, W)): the
            # same GEMM (self.gemm_id: z itself, no scaling where the first call has a key), then
            # this call's own bias
            return self.gemm_id if call[1] is None else self.linear_bias(self.gemm_id, self.param(call[1]))
        if call is not None and self.gemm_id is not None and not self.in_prologue() and \
                (self.side_by_side or (self.first_gemm is not None and self.first_gemm[0] is not None)):
            # Another Linear of the module's input (or of the prologue's output) beside the first
            # (gate_proj(x), up_proj(x)): one GEMM of their weights concatenated, walked again from the start
            calls = (self.side_by_side or (self.first_gemm[0],)) + (call,)
            if len(calls) > MAX_SIDE_BY_SIDE:
                raise self.refuse(f"{len(calls)} Linears of {self._side_by_side_of()} side by side "
                                  f"({', '.join(c[0] for c in calls)}); kgen takes {MAX_SIDE_BY_SIDE} "
                                  "(a gated unit's, as one GEMM whose output's halves are theirs)")
            raise _SideBySide(calls)
        scaling = ()
        if self.gemm_id is None and isinstance(x, _Marker) and x.kind == "scaled_input":
            # (x * c) Wᵀ = c (x Wᵀ): the GEMM of x, its z scaled before the bias (the Linear's
            # steps, rounded once in a 16-bit build: lower.forward.linear_steps)
            scaling, x = x.payload, _Marker("input", False)
        if self.in_prologue() and len(self.nodes) == 1 and isinstance(x, _Marker) and x.kind == "input" \
                and not x.payload:
            # (a prologue begun by an op that turned out the identity, a Dropout in eval mode: none)
            self.nodes, self.gemm_id, self.out_features = [], None, None
        if self.gemm_id is not None:
            self.chain(x)
        elif not (isinstance(x, _Marker) and x.kind == "input" and not x.payload):
            what = "a detached copy of the module's input" if isinstance(x, _Marker) and x.kind == "input" \
                else f"get_inputs()' tensor {x.payload[0] + 1}, an input kgen reads after the GEMM only" \
                if isinstance(x, _Marker) and x.kind == "extra_input" else "not the module's input"
            raise self.refuse(f"the GEMM's input is {what} (kgen's GEMM comes first)")
        expression = weight if isinstance(weight, WeightExpr) else None
        if expression is not None:
            w, weight = expression.value, expression.name
        else:
            try:
                w = getattr(self.model.get_submodule(weight.rpartition(".")[0]) if "." in weight else self.model,
                            weight.rpartition(".")[2])
            except Exception as e:   # a parametrization torch cannot evaluate while kgen traces
                raise self.refuse(f"reading the weight {weight} failed ({type(e).__name__}: "
                                  f"{str(e)[:200]})") from None
        inp = self.ref.input
        if inp.dim() != 2 or inp.dtype not in MODULE_DTYPES:
            # (An input of more dimensions is its rows here: Reference.rows_of, _check_rows.)
            raise self.refuse(f"the input is {inp.dtype} of shape {tuple(inp.shape)}; kgen's GEMM "
                              "takes one (batch, in_features) tensor of float32, bfloat16 or float16 "
                              "(or (..., in_features), a Linear over its last dimension)")
        k_dim = 0 if stored_kn else 1
        if w.dim() != 2 or w.shape[k_dim] != self.in_features:
            want = f"({self.in_features}, N)" if stored_kn else f"(N, {self.in_features})"
            hint = (f" (x @ W reads W stored (in, out); for nn.Linear's (out, in) layout write "
                    f"x @ {weight}.t())" if stored_kn and w.dim() == 2 and w.shape[1] == self.in_features else "")
            rows_of = self.ref.rows_of
            if not hint and rows_of is not None and w.dim() == 2 and any(
                    torch.Size(rows_of[j:]).numel() == w.shape[k_dim] for j in range(1, len(rows_of) - 1)):
                # (x.view(x.size(0), -1) or flatten(1) before the Linear, most likely: the features
                # are several of the input's dimensions, where kgen takes the last one's as them.)
                hint = (f" (its {w.shape[k_dim]} in-features are the product of trailing sizes of the input "
                        f"{tuple(rows_of)}: is the input flattened into them before the GEMM? kgen reads an "
                        f"input of more dimensions as rows of its last one, (..., {rows_of[-1]}), or, where the "
                        "GEMM reads it flattened to (batch, features), as that; no other op on the input before "
                        "the GEMM)")
            raise self.refuse(f"the weight {weight} has shape {tuple(w.shape)}, not {want}{hint}")
        if w.dtype != inp.dtype:
            raise self.refuse(f"the weight {weight} is {w.dtype} and the input {inp.dtype}: "
                              "nn.Linear needs one dtype")
        self.out_features = int(w.shape[1 - k_dim])
        self.gemm_id = self.add("gemm", "tile", weight=weight, **({"stored_kn": True} if stored_kn else {}),
                                **({"weight_code": expression.body} if expression is not None else {}))
        z = self.gemm_id
        for op, operand in scaling:
            z = self.pointwise(op, [z, self._scaling_operand(operand)])
        if scaling:
            call = None
        if bias_path is None:
            self.first_gemm = (call, z)
            return z
        bias = self.param(bias_path)
        self.first_gemm = (call, self.add("pointwise", "tile", [z, bias], "add"))
        self.nodes[self.first_gemm[1]].linear_bias = True
        return self.first_gemm[1]

    def _side_by_side_source(self, x) -> bool:
        """Whether x is a value kgen takes Linears side by side of: the module's input before any
        GEMM, or the output of the prologue (the value the first GEMM reads, `gate_proj(norm(x))`,
        `up_proj(norm(x))`: the Linear that reads it in the prologue closes it, and it is then a
        marker of the part closed, flagged prologue_output by Tracer.chain), while the first GEMM's
        part is being traced."""
        if isinstance(x, _Marker) and x.kind == "input":
            return not x.payload and self.previous is None
        if self.in_prologue():
            return isinstance(x, _Id) and self.level(x) == "tile"
        return isinstance(x, _Marker) and x.kind == "earlier" and getattr(x, "prologue_output", False) and \
            self.previous is not None and self.previous.is_prologue and self.previous.previous is None

    def _side_by_side_of(self) -> str:
        """What the Linears side by side read, as refusals name it."""
        after = self.in_prologue() or (self.previous is not None and self.previous.is_prologue)
        return "the output of the ops before the first GEMM" if after else "the module's input"

    def side_by_side_gemm(self) -> int:
        """The one GEMM of the Linears of the module's input side by side (self.side_by_side): x
        times their weights concatenated (graph.SIDE_BY_SIDE, a weight the forward computes, so
        that autograd splits its gradient back to each), plus their biases concatenated where they
        have them (one parameter node, graph.side_by_side_path). Linear c's output is the GEMM's
        half c (Tracer.half): the same dot products as its own GEMM, each rounded once in a
        16-bit module, after its bias, as eager's Linear rounds."""
        if self.side_by_side_output is not None:
            return self.side_by_side_output
        names, widths = [], []
        for weight, bias_path, stored_kn in self.side_by_side:
            w = self._tensor(weight)
            if w.dim() != 2:
                raise self.refuse(f"the weight {weight} of Linears side by side has shape {tuple(w.shape)}")
            widths.append(int(w.shape[1 if stored_kn else 0]))
            names.append(self_attr(weight) + (".t()" if stored_kn else ""))
        if len(set(widths)) > 1:
            raise self.refuse(f"Linears of {self._side_by_side_of()} side by side of different widths ("
                              + ", ".join(f"{c[0]}: {n}" for c, n in zip(self.side_by_side, widths))
                              + "); kgen takes them as one GEMM whose output's halves are theirs, of equal widths")
        biases = [c[1] for c in self.side_by_side]
        if any(b is None for b in biases) and any(b is not None for b in biases):
            raise self.refuse(f"Linears of {self._side_by_side_of()} side by side, some with a bias and some without ("
                              + ", ".join(f"{c[0]}: {'bias ' + c[1] if c[1] else 'no bias'}" for c in self.side_by_side)
                              + "); kgen takes them as one GEMM, all with biases or none")
        paths = [c[0] for c in self.side_by_side]
        code = side_by_side_code(paths, lambda p: names[paths.index(p)])
        value = side_by_side(*(self._tensor(c[0]).t() if c[2] else self._tensor(c[0]) for c in self.side_by_side))
        expression = WeightExpr((f"return {code}",), f"{' and '.join(paths)} side by side", value)
        line, of = self.where, self._side_by_side_of()
        part = len(self.previous.parts) if self.previous is not None else 0
        z = self.gemm(self.input_marker, expression, side_by_side_path(biases) if biases[0] else None)
        self.nodes[self.gemm_id].attrs["side_by_side"] = tuple(paths)
        self.nodes[self.gemm_id].attrs["weight_doc"] = (
            f"GEMM {part}'s weight: {', '.join(paths)} concatenated, (out, in), for the Linears of {of} the\n"
            f"reference calls side by side (first at line {line[0]}, `{line[1]}`): one GEMM whose output's\n"
            "halves are theirs. Cached for inference where the user trusts torch's version counters\n"
            "(kgen_trust_weight_versions); otherwise, and where a gradient is wanted, concatenated on each call.")
        self.side_by_side_output = z
        return z

    def linear_bias(self, z, bias) -> int:
        """z + bias where the GEMM's own call adds it (nn.Linear, F.linear(x, W, b), addmm): inside
        torch's one rounding of the Linear's output to a 16-bit dtype (Node.linear_bias)."""
        result = self.pointwise("add", [z, bias])
        if isinstance(result, _Id) and self.nodes[result].op == "add":
            self.nodes[result].linear_bias = True
            # (a bias torch's GEMM reads in float32, addmm's beta * b: the Linear's output is
            # still of the module's dtype, rounded once)
            self.nodes[result].fp32 = self.nodes[z].fp32 if isinstance(z, _Id) else False
        return result

    def close_part(self, output: int) -> Graph:
        """The GEMM part traced so far, whose output is node `output`."""
        batchnorms = [n for n in self.nodes if n.kind == "batchnorm"]
        if len(batchnorms) > 1:
            self.where = (batchnorms[1].line, batchnorms[1].text)
            raise self.refuse("a second BatchNorm1d after the same GEMM is not supported yet")
        return Graph(self.nodes, output, self.in_features, self.out_features, previous=self.previous)

    def chain(self, x) -> None:
        """A GEMM after the first: the nodes so far become the previous part, whose output is x,
        and a new part starts with this GEMM. Values of the previous part are not visible in the
        new one (Tracer.value refuses them): the parts share only the GEMM input, which the
        previous part writes to memory and the next GEMM reads as its x."""
        what = "the input of a second GEMM"
        if isinstance(x, _Marker) and x.kind == "extra_input":
            raise self.refuse(f"{what} is get_inputs()' tensor {x.payload[0] + 1}, an input kgen reads after the GEMM "
                              "only, per element (kgen chains GEMMs: each one reads the output of the part before it)")
        if isinstance(x, _Marker) and x.kind == "input" and self.previous is not None:
            raise self.refuse(f"{what} is the module's input, after a GEMM of a value computed from it: kgen takes "
                              "Linears of the input side by side (one GEMM of their weights) before any other GEMM, "
                              "and chains GEMMs through the output of the part before")
        if isinstance(x, _Marker) and x.kind == "earlier":
            raise self.refuse(f"{what} is a value computed before the GEMM at line {x.payload} (two GEMMs of one "
                              "value side by side are not supported: kgen chains GEMMs, each reading the output of "
                              "the part before it)")
        if isinstance(x, _Marker) or not isinstance(x, int):
            raise self.refuse(f"{what} is not a (batch, features) value computed from the first GEMM "
                              "(kgen chains GEMMs: each one reads the output of the part before it)")
        level = self.level(x)
        batchnorms = [n for n in self.nodes if n.kind == "batchnorm"]
        if self.in_prologue() and batchnorms:
            self.where = (batchnorms[0].line, batchnorms[0].text)
            raise self.refuse("BatchNorm1d of the module's input before the first GEMM is not supported yet (kgen "
                              "takes row-wise and point-wise ops there: LayerNorm, RMSNorm, activations, Dropout)")
        if self.in_prologue() and self.gemm_id not in Graph(self.nodes, x, self.in_features, self.out_features).gradient_reaches():
            raise self.refuse("the GEMM's input is computed from the module's input under torch.no_grad() or through a "
                              "detach, so no gradient reaches the input (kgen's ops before the first GEMM send it one)")
        if self.in_prologue() and level != "tile":
            shape = shape_text(tuple("batch" if d == "M" else d for d in self.shape_of(x)))
            raise self.refuse(f"the GEMM's input is a value of shape {shape} computed from the module's input; "
                              f"kgen's ops before the first GEMM keep the input's (batch, {self.in_features}) "
                              "(row-wise and point-wise ops: LayerNorm, RMSNorm, activations, Dropout)")
        if level not in ("tile", "pooled"):
            shape = shape_text(tuple("batch" if d == "M" else d for d in self.shape_of(x)))
            raise self.refuse(f"{what} is a value of shape {shape}; kgen chains GEMMs over "
                              "(batch, features) values")
        width = self.shape_of(x)[1]
        closing_prologue = self.in_prologue()
        self.previous = self.close_part(x)
        line = self.where[0]

        def earlier(v, shape):
            marker = _Marker("earlier", line, shape)
            # (the prologue's output: Linears of it side by side are taken, Tracer._side_by_side_source)
            marker.prologue_output = closing_prologue and isinstance(v, _Id) and v == x
            return marker
        for fx_node, v in self.env.items():
            if isinstance(v, _Marker) and v.kind == "transposed" and isinstance(v.payload, int):
                # (y.T of a value of the part closed: out of reach as y is, its shape y's reversed)
                self.env[fx_node] = _Marker("earlier", line, self._shape_or_none(v.payload)[::-1])
            elif isinstance(v, int) or (isinstance(v, _Marker) and v.kind in ("values_indices", "unsqueezed", "windows")):
                # (its shape kept: a size of it is still a number, as GPT-2's Conv1D reads
                # x.size()[:-1] after its addmm)
                self.env[fx_node] = earlier(v, self._shape_or_none(v))
            elif isinstance(v, _Marker) and v.kind in ("lead", "lead_t") and isinstance(v.payload, int):
                # (a value of the part closed with the input's leading sizes: out of reach as its rows
                # are, or a later op would read a node id of the nodes just dropped)
                self.env[fx_node] = _Marker(v.kind, earlier(v.payload if v.kind == "lead" else None,
                                                            self._shape_or_none(v.payload)))
        self.nodes, self.params, self.consts, self.inputs, self.extra_reads = [], {}, {}, {}, {}
        self.gemm_id, self.in_features = None, int(width)

    # ---- the walk ------------------------------------------------------------------------
    def _forward_defaults(self) -> list:
        """Model.forward's parameters after its input that have defaults, as (name, default):
        get_inputs() gives the input alone, so the reference runs with these at their defaults
        and kgen traces it so. A default other than None, a bool, a number or a string is refused
        (the emitted forward could not compare an argument with it); a parameter without one is
        the second input that the caller refuses."""
        # (after self, the input and the extra inputs get_inputs() gives)
        params = list(inspect.signature(type(self.model).forward).parameters.values())[2 + len(self.ref.extra_inputs):]
        out = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty:
                continue
            if p.default is not None and not isinstance(p.default, (bool, int, float, str)):
                raise Unsupported(f"{self.ref.path}: Model.forward's parameter {p.name}={p.default!r}: kgen "
                                  "traces the forward with such parameters at their defaults, which must be "
                                  "None, a bool, a number or a string")
            out.append((p.name, p.default))
        return out

    def _refuse_hooks(self) -> None:
        """A forward hook changes what the module computes outside forward(), which torch.fx does
        not see (it traces forward alone): refused, naming the module and the hook."""
        from torch.nn.modules.lazy import LazyModuleMixin

        kinds = ("_forward_hooks", "_forward_pre_hooks")
        for name, module in self.model.named_modules():
            if isinstance(module, LazyModuleMixin):
                # (its hook is torch's own, which makes the parameters on the first call)
                plain = type(module).__name__.removeprefix("Lazy")
                raise Unsupported(f"{self.ref.path}: the submodule {name!r} is a lazy module "
                                  f"({type(module).__name__}): it makes its parameters on its first call, "
                                  f"from that input's shape, and kgen reads them before any call; write "
                                  f"nn.{plain} with its input size given")
            where = f"the submodule {name!r}" if name else "the model"
            for hook in getattr(module, "_forward_pre_hooks", {}).values():
                # torch.nn.utils.weight_norm / spectral_norm of old: a hook that recomputes the
                # weight before each call; their torch.nn.utils.parametrizations forms kgen takes
                util = {"WeightNorm": "weight_norm", "SpectralNorm": "spectral_norm"}.get(type(hook).__name__)
                if util and type(hook).__module__.startswith("torch.nn.utils"):
                    raise Unsupported(f"{self.ref.path}: {where} is under torch.nn.utils.{util}, whose forward pre "
                                      "hook recomputes the weight outside forward() (kgen traces forward() alone): "
                                      f"use torch.nn.utils.parametrizations.{util}, which kgen takes")
            for kind in kinds:
                if getattr(module, kind, None):
                    raise Unsupported(f"{self.ref.path}: {where} has a {kind[1:-1].replace('_', ' ')} "
                                      "(register_forward_hook / register_forward_pre_hook), which changes "
                                      "its output outside forward(); kgen traces forward() alone")
        # A forward set on the instance (self.forward = self._fwd in __init__): what calling the
        # module runs, but fx traces the class's forward (or finds none), and ModelNew's forward, a
        # method of the class, would be shadowed by it.
        if "forward" in vars(self.model):
            raise Unsupported(f"{self.ref.path}: {type(self.model).__name__}.__init__ sets self.forward, which "
                              "replaces the class's forward for that instance; kgen traces the class's forward and "
                              "ModelNew defines its own (define forward as a method of the class)")
        # The model's own __call__ (a child's is fx's to trace: it calls the child's module).
        if type(self.model).__call__ is not nn.Module.__call__:
            raise Unsupported(f"{self.ref.path}: {type(self.model).__name__} overrides __call__, which changes "
                              "what calling the module computes outside forward(); kgen traces forward() alone "
                              "(move that work into forward)")
        from torch.nn.modules import module as torch_module
        for kind in ("_global_forward_hooks", "_global_forward_pre_hooks"):
            if getattr(torch_module, kind, None):
                raise Unsupported(f"{self.ref.path}: a global forward hook is registered "
                                  "(torch.nn.modules.module.register_module_forward_hook); kgen traces "
                                  "forward() alone")

    def _refuse_state_changes(self, before: dict, text) -> None:
        """State the forward changed while traced (fx runs its Python once, and records the ops on
        parameters, buffers and the input alone): an attribute rebound or a plain value changed
        (self.calls += 1, self.bn.momentum = 0.5, self.hist.append(...)), a tensor attribute that
        is no parameter or buffer written in place (self.s.mul_(0.5), which fx runs at trace time
        and leaves out of the graph), torch's generator seeded. One emitted forward computes every
        call from the module's parameters and buffers as they are: refused, naming what changed.
        `text`: the reference's source line of a line number (_LocatingTracer.text)."""
        for line in self.seeded:
            self.where = (line, text(line))
            raise self.refuse("the forward seeds torch's random generator (kgen's file draws its dropout "
                              "masks from the generator as it finds it); seed outside the module")
        after = _module_state(self.model)
        # (fx's own: a tensor the trace computed, lifted onto the root as _tensor_constant<k>)
        lifted = {k for k in after.keys() - before.keys() if re.fullmatch(r"_tensor_constant\d+", k[1])}
        for key in sorted(before.keys() | after.keys() - lifted):
            if before.get(key, _ABSENT) != after.get(key, _ABSENT):
                path, name = key
                where = f"self.{path}.{name}" if path else f"self.{name}"
                was, now = before.get(key), after.get(key)
                in_place = isinstance(was, _TensorState) and isinstance(now, _TensorState) and was[0] == now[0]
                what = f"writes the tensor {where} in place" if in_place else f"changes {where}"
                if not path and name in ("_dtype", "_fwd_used_autocast"):
                    # (torch.amp.custom_fwd, torch.cuda.amp.custom_fwd: meant for an autograd.Function)
                    raise Unsupported(f"{self.ref.path}: forward is decorated with torch.amp.custom_fwd "
                                      "(torch.cuda.amp.custom_fwd), which is meant for a torch.autograd.Function's "
                                      "forward: it stores autocast's state on the module (self._dtype) and, with "
                                      "cast_inputs, runs forward outside autocast; drop the decorator (kgen's file "
                                      "follows torch.autocast as eager's Linear does), or use "
                                      "torch.autocast(enabled=False) in forward")
                raise Unsupported(f"{self.ref.path}: the forward {what}: state kept from call to call, which kgen's "
                                  "file, computing each call from the module's parameters and buffers as they are, "
                                  "would not follow (set it in __init__, or keep it in a registered buffer)")

    @contextlib.contextmanager
    def _environment_answered(self):
        """ENVIRONMENT_QUERIES answered as the trace chooses where the reference's own code asks
        them (fx runs forward's Python once: a branch on one is baked in), each recorded with its
        line; asked from anywhere else (torch's own code, kgen's), they answer as they are."""
        path = str(self.ref.path)
        saved = []

        def answering(name, real, answer):
            def query(*args, **kwargs):
                frame = sys._getframe(1)
                if frame.f_code.co_filename == path:
                    self.queries_read.setdefault(name, frame.f_lineno)
                    return answer
                return real(*args, **kwargs)
            return query

        for name, (owner, attr, answer, other) in ENVIRONMENT_QUERIES.items():
            real = getattr(owner, attr)
            saved.append((owner, attr, real))
            setattr(owner, attr, answering(name, real, other if name in self.other_answers else answer))

        def seeding(real):
            def seed(*args, **kwargs):
                frame = sys._getframe(1)
                if frame.f_code.co_filename == path:
                    self.seeded.append(frame.f_lineno)   # (refused after the trace; not seeded)
                    return None
                return real(*args, **kwargs)
            return seed

        for owner, attr in SEEDING:
            real = getattr(owner, attr)
            saved.append((owner, attr, real))
            setattr(owner, attr, seeding(real))
        try:
            yield
        finally:
            for owner, attr, real in saved:
                setattr(owner, attr, real)

    def run(self) -> Graph:
        """The IR of the forward. Where the walk meets a second Linear of the module's input
        (_SideBySide), it starts again from the state the tracer had here, with the Linears known
        to be side by side (the first one's output is then a half of their one GEMM's from the
        start, and no value made from it needs to be rewritten)."""
        start = {k: copy.copy(v) if isinstance(v, (list, dict, set)) else v for k, v in self.__dict__.items()}
        while True:
            try:
                return self._walk()
            except _SideBySide as found:
                self.__dict__.clear()
                self.__dict__.update({k: copy.copy(v) if isinstance(v, (list, dict, set)) else v
                                      for k, v in start.items()})
                self.side_by_side = found.calls

    def _walk(self) -> Graph:
        token_of = getattr(self.ref, "token_of", None)
        shape = tuple(self.ref.rows_of) if self.leads else tuple(token_of or self.ref.input.shape)
        # (a (batch, tokens, features) input of which the forward selects one token: its number of
        # tokens symbolic, as the batch, so that a position read from it, x[:, x.size(1) - 1], is
        # no constant the file would bake in: Tracer._on_tokens refuses it)
        tracer = _LocatingTracer(str(self.ref.path), self.ref.source, shape, 2 if token_of else max(self.leads, 1))
        # Buffers as get_attr nodes, like parameters: otherwise fx runs an op on a buffer (a
        # view, say) at trace time and records its result as a constant the module lacks.
        tracer.proxy_buffer_attributes = True
        self.forward_defaults = self._forward_defaults()
        self._refuse_hooks()
        state = _module_state(self.model)
        try:
            # (grad on, so that forward's own torch.no_grad() shows: _LocatingTracer.create_node)
            with torch.enable_grad(), tracer.unseen_by_fx_refused(), tracer.unbound_methods_traced(), \
                    self._environment_answered():
                fx_graph = tracer.trace(self.model, concrete_args=dict(self.forward_defaults) or None)
        except Unsupported:
            raise
        except USER_FAILURES as e:  # fx's failure (or the forward's own, an exit too) is the user's message
            said = " ".join(reference_said(e).split())   # (one line: some of torch's messages span several)
            said = next((why for known, why in FX_FAILURES.items() if known in said), said)
            # the reference's innermost line where fx failed (fx's message names none)
            lines = [tb.tb_lineno for tb in _tracebacks(e.__traceback__) if tb.tb_frame.f_code.co_filename == tracer.filename]
            at = f"line {lines[-1]}: `{tracer.text(lines[-1])}`: " if lines else ""
            if lines and said == FX_FAILURES["cannot be used as inputs to control flow"] and ".dtype" in tracer.text(lines[-1]):
                said = DTYPE_BRANCH
            raise Unsupported(f"{self.ref.path}: {at}torch.fx cannot trace Model.forward: "
                              f"{type(e).__name__}: {said[:400]}{'...' if len(said) > 400 else ''}"
                              f"{self.rows_note()}") from None
        self._refuse_state_changes(state, tracer.text)
        if self.ref.input.dtype == torch.float32 and tracer.autocast_off and any(
                n.meta.get(autocast.AUTOCAST_OFF) and autocast.call_name(n, self.model) in autocast.LOW_CALLS
                for n in fx_graph.nodes):
            # An fp32 module whose GEMM runs with CUDA's autocast turned off computes it in float32
            # inside a caller's autocast region, as eager does; autocast's 16-bit build would not.
            line, text = tracer.autocast_off[0]
            self.fp32_casts.append((line, text, "it turns torch.autocast off around its GEMM, so inside a "
                                    "caller's autocast region torch computes it in float32, which kgen's 16-bit "
                                    "builds do not"))
        self.called_modules = tracer.called_modules
        self.gemm_id = None
        self.first_gemm = None   # ((weight, bias, stored_kn), its value): Tracer.gemm
        # An op tried before the first GEMM to see whether it can wait (Tracer.run's deferral): the
        # module's input read then raises _BeforeTheGemm, so that the op is deferred; read where a
        # value must be computed now (a GEMM's input), it starts a prologue part (Tracer.prologue).
        self.trying_deferral = False
        self.out_features = None
        self.in_features = int(self.ref.input.shape[-1])
        self.module_in_features = self.in_features
        self.previous: Graph | None = None
        self.input_marker = _Marker("input", False)
        # The token the forward selects of a (batch, tokens, features) input (Reference.token_of),
        # its position as written (0, -1): Graph.token.
        self.token: int | None = None
        self.env: dict[torch.fx.Node, object] = {}
        self.aliases: dict[torch.fx.Node, list] = {}   # fx values sharing storage (Tracer._join)
        # Each alias's receiver and whether they share storage in float32 only (DTYPE_ALIAS_METHODS).
        self.alias_parent: dict[torch.fx.Node, tuple[torch.fx.Node, bool]] = {}
        self.order = {n: i for i, n in enumerate(fx_graph.nodes)}
        self.augmented = self._augmented_assignments(fx_graph)
        env = self.env
        output = None
        # (fx makes a placeholder of each parameter left at its default too, after the input's.)
        placeholders = [n for n in fx_graph.nodes if n.op == "placeholder"]
        # forward(self, x, **kwargs): the keywords are not an input (the module is called with its
        # input alone, so they are empty); reading them is refused (Tracer.value).
        keywords = {n for n in placeholders if str(n.target).startswith("**")}
        # forward(self, x, *args): the positional arguments after the input, empty too
        extra = {n for n in placeholders[1:] if n not in keywords and str(n.target).startswith("*")}
        placeholders = [n for n in placeholders if n not in keywords and n not in extra]
        # fx's checks that those parameters have their traced values (nodes reading them, and
        # the asserts of those): the emitted forward checks them itself.
        fx_checks = set(placeholders[len(placeholders) - len(self.forward_defaults):])
        placeholders = placeholders[:len(placeholders) - len(self.forward_defaults)]
        given = 1 + len(self.ref.extra_inputs)
        if len(placeholders) != given and not (len(placeholders) == 1 and str(placeholders[0].target).startswith("*")):
            raise Unsupported(f"{self.ref.path}: Model.forward takes {len(placeholders)} inputs and get_inputs() "
                              f"gives {given} (the module is called as model(*get_inputs()))")
        # (forward(self, x, residual): the placeholder after the input is get_inputs()' second tensor)
        extra_index = {n: i for i, n in enumerate(placeholders) if i and not str(n.target).startswith("*")}
        self.extra_input_names = ([str(n.target) for n in extra_index] if extra_index else
                                  [f"input{k}" for k in range(1, given)])   # (forward(*args): args[k])
        self.input_name = None if str(placeholders[0].target).startswith("*") else str(placeholders[0].target)
        for fx_node in fx_graph.nodes:
            self._locate(fx_node)
            self.fx_node = fx_node
            if fx_node in fx_checks or any(a in fx_checks for a in fx_node.all_input_nodes):
                fx_checks.add(fx_node)
                continue
            if fx_node.op == "placeholder":
                # forward(self, *args): the inputs as a tuple, of which args[0] is the input
                env[fx_node] = (_Marker("keywords", None) if fx_node in keywords
                                else _Marker("extra_args", None) if fx_node in extra
                                else _Marker("inputs", None) if str(fx_node.target).startswith("*")
                                else _Marker("extra_input", (extra_index[fx_node], False)) if fx_node in extra_index
                                else _Marker("lead", self.input_marker) if self.leads
                                else _Marker("tokens", self.input_marker) if getattr(self.ref, "token_of", None)
                                else self.input_marker)
                continue
            if fx_node.op == "output":
                # (a tuple, list or dict of outputs: refused below, as anything but one tensor)
                output = self._materialized(env[fx_node.args[0]], {})[0] \
                    if isinstance(fx_node.args[0], torch.fx.Node) else None
                if self.leads:
                    output = self._lead_output(output)
                if isinstance(output, _Marker) and output.kind in ("indices", "broadcast", "filled"):
                    self._locate(fx_node.args[0])   # (the line that made it)
                    self.value(output)   # (refused, naming the indices)
                if isinstance(output, _Marker) and output.kind in ("unsqueezed", "windows"):
                    self._locate(fx_node.args[0])   # (the view's line, for the emitted forward's comment)
                    # (made under torch.no_grad(): the view has no gradient, as Tracer._finished gives)
                    finished = functools.partial(self._finished, fx_node.args[0])
                if isinstance(output, _Marker) and output.kind == "unsqueezed" and isinstance(output.payload, int):
                    output = self._output_view(finished(output.payload), "unsqueeze", (1,))   # (batch, 1, N)
                elif isinstance(output, _Marker) and output.kind == "windows":
                    x, k = output.payload   # (batch, P, k)
                    output = self._output_view(finished(x), "reshape", ("M", -1, k))
                if not isinstance(output, int):
                    raise self.refuse(self._output_refusal(fx_node.args[0], output))
                continue
            args = torch.fx.node.map_arg(fx_node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(fx_node.kwargs, lambda n: env[n])
            receiver, writes = self._aliasing(fx_node)
            if fx_node.op == "call_function" and fx_node.target is F.linear:
                bound = self._bind(_linear, args, kwargs)
                if isinstance(bound["bias"], _Deferred):
                    # F.linear(x, W, self.b * 2): a bias computed from parameters, an op made before
                    # the GEMM (deferred), is taken after it: F.linear(x, W) + bias, as torch adds it
                    z = self.visit(fx_node, *self._materialized((bound["input"], bound["weight"]), {}))
                    (bias,), _ = self._materialized((bound["bias"],), {})
                    env[fx_node] = self._finished(fx_node, self.linear_bias(z, bias))
                    continue
            if self.gemm_id is None and not writes and self._deferrable(args, kwargs):
                # An op on parameters or the input alone before the first GEMM (scale =
                # self.logit_scale.exp(), CLIP's left operand `self.logit_scale.exp() *
                # F.normalize(self.fc(x))`, a residual's `0.5 * x` written before the GEMM): a
                # value of the epilogue, so it is taken where it is first used after the GEMM.
                # (The GEMM itself, and ops that take the input as it is, flatten(1) and the
                # like, run here as they would below.)
                self.trying_deferral = True
                try:
                    result = self.visit(fx_node, *self._materialized(args, kwargs))
                except _BeforeTheGemm:
                    env[fx_node] = _Deferred(fx_node, args, kwargs)
                    continue
                finally:
                    self.trying_deferral = False
                result = self._finished(fx_node, result)
                env[fx_node] = result
                if receiver is not None:
                    self._join(receiver, fx_node)
                continue
            args, kwargs = self._materialized(args, kwargs)
            if writes:
                self._check_writable(env[receiver], fx_node)
            masked = fx_node.target is not operator.setitem and any(
                isinstance(v, _Marker) and v.kind == "masked" for v in (*args, *kwargs.values()))
            result = self._on_masked(fx_node, args, kwargs) if masked else \
                self._finished(fx_node, self.visit(fx_node, args, kwargs))
            if writes and isinstance(env[receiver], _Marker) and env[receiver].kind == "masked":
                if len(self.aliases.get(receiver, [receiver])) > 1:
                    raise self.refuse("an in-place op on values selected by a mask (y[mask]) that another name "
                                      "shares (a view or detach of it); write the op out of place")
                env[receiver] = result   # (y[m] *= c: torch's y[m] is a copy, which the op writes)
            elif writes:
                self._write(receiver, result, fx_node)
            env[fx_node] = result
            if receiver is not None:
                self._join(receiver, fx_node)
        if self.gemm_id is None:
            raise Unsupported(f"{self.ref.path}: Model.forward has no GEMM (nn.Linear, F.linear or "
                              "x @ W.T); kgen synthesizes a GEMM followed by an epilogue chain")
        if self.in_prologue():
            raise Unsupported(f"{self.ref.path}: Model.forward has no GEMM after its ops on the input (nn.Linear, "
                              "F.linear or x @ W.T); kgen synthesizes GEMMs, each followed by an epilogue chain, "
                              "and ops on the input before the first")
        graph = self.close_part(output)
        graph.output_tail = self.output_tail
        graph.tail_rounds = self.tail_rounds
        graph.autocast_output = autocast.output_kind(fx_graph, self.model, lambda n: self._aliasing(n)[1])
        if graph.output_level() not in ("tile", "row", "rowflat", "pooled", "full"):
            raise Unsupported(f"{self.ref.path}: the output does not depend on the input")
        return graph

    def _deferrable(self, args, kwargs) -> bool:
        """Whether an op's operands are parameters, the module's input (or ops on them alone,
        deferred) and numbers: no value of the epilogue, no weight matrix."""
        leaves: list = []
        torch.fx.node.map_aggregate((args, kwargs), lambda v: leaves.append(v) or v)
        # (the input with its leading sizes, B, S, D = x.shape read: the input, Tracer.leads)
        leaves = [v.payload if self._is_lead_input(v) else v for v in leaves]
        if any(isinstance(v, _Id) or (isinstance(v, _Marker) and v.kind not in DEFERRABLE_KINDS) for v in leaves):
            return False
        return any(isinstance(v, _Deferred) or isinstance(v, _Marker) for v in leaves)

    def _materialized(self, args, kwargs):
        """args and kwargs with each deferred op on parameters (_Deferred) taken now, in the
        order the module made them, each once."""
        def take(v):
            if not isinstance(v, _Deferred):
                return v
            if not isinstance(self.env.get(v.fx_node), _Deferred):
                return self.env[v.fx_node]   # (taken already)
            scaling = self._input_scaling(v) if self.gemm_id is None else None
            if scaling:
                # the module's input scaled by a number, before the first GEMM: the GEMM takes it
                # (gemm); any other op refuses it as before (value). Not kept in env: used after
                # the GEMM, the op is taken there as any other. Of the input with its leading
                # sizes, the rows' scaled input with them (Tracer._on_lead: the GEMM of its rows).
                scaled = _Marker("scaled_input", scaling)
                return _Marker("lead", scaled) if self._scales_lead_input(v) else scaled
            d_args, d_kwargs = self._materialized(v.args, v.kwargs)
            now = self.fx_node, self.where   # (located at the op's own line while it is taken)
            self.fx_node = v.fx_node
            self._locate(v.fx_node)
            try:
                result = self._finished(v.fx_node, self.visit(v.fx_node, d_args, d_kwargs))
            finally:
                self.fx_node, self.where = now
            self.env[v.fx_node] = result
            return result

        leaves: list = []
        torch.fx.node.map_aggregate((args, kwargs), lambda v: leaves.append(v) or v)
        if not any(isinstance(v, _Deferred) for v in leaves):
            return args, kwargs   # (as they are: map_aggregate makes a torch.Size a tuple)
        return (torch.fx.node.map_aggregate(args, take), torch.fx.node.map_aggregate(kwargs, take))

    def _input_scaling(self, v) -> tuple | None:
        """Where v (a deferred op's value) is the module's input scaled by numbers (x * 2, 2 * x,
        x / self.t, -x, x.mul(c), torch.div(x, c), and chains of them): the scalings, in order, as
        (op, operand) pairs of the IR's mul / div; () for the input itself; else None."""
        if isinstance(v, _Marker) and v.kind == "input" and not v.payload or self._is_lead_input(v):
            return ()
        if not isinstance(v, _Deferred) or v.kwargs or v.fx_node.meta.get(NO_GRAD):
            return None   # (made under no_grad: a detached input, which the GEMM refuses)
        node = v.fx_node
        op = (INPUT_SCALING_METHODS.get(node.target) if node.op == "call_method"
              else INPUT_SCALING_FUNCTIONS.get(node.target) if node.op == "call_function" else None)
        args = v.args
        if op == "neg" and len(args) == 1:
            inner = self._input_scaling(args[0])
            return None if inner is None else (*inner, ("mul", -1.0))
        if op is None or len(args) != 2:
            return None
        inner = self._input_scaling(args[0])
        operand = args[1]
        if inner is None and op == "mul":
            inner, operand = self._input_scaling(args[1]), args[0]
        if inner is None or not self._scalar_like(operand):
            return None
        return (*inner, (op, operand))

    def _is_lead_input(self, v) -> bool:
        """Whether v is the module's input with its leading sizes (a forward that reads them:
        Tracer.leads)."""
        return isinstance(v, _Marker) and v.kind == "lead" and v.payload is self.input_marker

    def _scales_lead_input(self, v) -> bool:
        """Whether the input _input_scaling found v to scale is the one with its leading sizes
        (the scalings' operands are numbers and parameters: the only such leaf is the input)."""
        if self._is_lead_input(v):
            return True
        return isinstance(v, _Deferred) and any(self._scales_lead_input(a) for a in _leaves((v.args, v.kwargs)))

    def _scalar_like(self, v) -> bool:
        """Whether v may scale the input before the GEMM: a number, or a parameter or an op on
        parameters alone (checked to be one element where it is taken: _scaling_operand)."""
        if _is_number(v):
            return True
        if isinstance(v, _Marker):
            return v.kind in PARAMETER_KINDS
        if isinstance(v, _Deferred):
            leaves: list = []
            torch.fx.node.map_aggregate((v.args, v.kwargs), lambda a: leaves.append(a) or a)
            return all(self._scalar_like(a) or not isinstance(a, (_Marker, _Deferred, _Id)) for a in leaves)
        return False

    def _scaling_operand(self, operand) -> int:
        """The IR value of a scaling of the input before the GEMM, taken after it: one number (a
        per-feature one, x * self.s, would scale the GEMM's K, not its output)."""
        (value,), _ = self._materialized((operand,), {})
        node = self.value(value)
        if self.level(node) != "scalar":
            raise self.refuse("the module's input scaled before the GEMM by a value that is not one number "
                              "(kgen scales the GEMM's output by a number; for a per-feature scale of x, "
                              "scale the weight: F.linear(x, self.fc.weight * self.s, self.fc.bias))")
        return node

    def _finished(self, fx_node: torch.fx.Node, result):
        """An op's value as the module has it: without gradient where forward made it so."""
        if isinstance(result, _Marker) and result.kind in ("lead", "lead_t") and fx_node.meta.get(NO_GRAD):
            return _Marker(result.kind, self._without_gradient(result.payload))
        return self._without_gradient(result) if fx_node.meta.get(NO_GRAD) else result

    def _without_gradient(self, result):
        """A value forward computes with gradients off (torch.no_grad(), set_grad_enabled(False),
        inference_mode): as x.detach(), no gradient flows back through it (an op on a parameter,
        self.alpha.clamp(0, 1), is such a value too). A parameter itself read as a view made so
        (self.alpha.view(1)) is refused: the IR would read the parameter, with the gradient torch
        does not give it."""
        if isinstance(result, _Id):
            return self.pointwise("detach", [result])
        if isinstance(result, _Marker) and result.kind == "transposed":
            # (x.T under no_grad: the transpose of x.detach(), which the GEMM refuses as it does
            # x.detach(); of a value, that of its detached value)
            inner = result.payload
            return _Marker("transposed", _Marker("input", True) if isinstance(inner, _Marker) else self._without_gradient(inner))
        if isinstance(result, _Marker) and result.kind in ("tensor", "matrix", "matrix_t", "weight_expr"):
            raise self.refuse("a parameter's value or view computed under torch.no_grad() (self.w.T, "
                              "self.b.view(1, -1), ... inside a no_grad block or a @torch.no_grad() forward; "
                              "kgen would give the parameter a gradient through it): read the parameter "
                              "outside no_grad, or write .detach()")
        return result

    # ---- in-place ops and aliases -----------------------------------------------------------
    def _aliasing(self, fx_node: torch.fx.Node) -> tuple[torch.fx.Node | None, bool]:
        """(the fx value whose storage fx_node's result shares, whether the op writes it): an
        in-place op (x.mul_(2), x += y, F.relu(x, inplace=True), nn.ReLU(inplace=True)) writes
        its first argument and returns it; contiguous, detach, Identity and an inactive Dropout
        return an alias of it (an active one, in training mode, a new tensor)."""
        first = fx_node.args[0] if fx_node.args else None
        if not isinstance(first, torch.fx.Node):
            return None, False
        if _transposes(fx_node) and self._transpose_of(self.env.get(first)) is not None:
            return first, False   # (x.T of an activation: a view of it, an in-place op on either changes both)
        # (an element of a tuple an op returns, torch.max(y, 1)[0], is no view of a tensor of its own)
        tensor = isinstance(self.env.get(first), _Id) or (
            isinstance(self.env.get(first), _Marker) and self.env[first].kind in ("unsqueezed", "broadcast", "masked"))
        if fx_node.op == "call_method":
            if fx_node.target in INPLACE_METHODS:
                return first, True
            if fx_node.target in VIEW_METHODS and (fx_node.target != "__getitem__" or tensor):
                return first, False
            if fx_node.target in DTYPE_ALIAS_METHODS and (fx_node.args[1:] or fx_node.kwargs
                                                          or fx_node.target not in ("type",)) \
                    and fx_node.kwargs.get("copy") is not True:
                return first, False   # (y.type() with no argument is a string; .to(copy=True) a new tensor)
        elif fx_node.op == "call_function":
            fn = fx_node.target
            if isinstance(self.env.get(first), (tuple, list)):
                return None, False   # (s += (n,) on a tuple of sizes: Python rebinds the name)
            if fn in INPLACE_FUNCTIONS or fx_node in self.augmented or fn is operator.setitem:
                return first, True
            index = fx_node.args[1] if len(fx_node.args) > 1 else None
            if fn is operator.getitem and isinstance(index, torch.fx.Node) and isinstance(self.env.get(index), _Marker) \
                    and self.env[index].kind == "comparison":
                return None, False   # (y[mask] is a copy in torch: Tracer.masked_assign)
            if fn in VIEW_FUNCTIONS and (fn is not operator.getitem or tensor):
                return first, False
            if fn is getattr and index == "data":
                return first, False   # (y.data: y's storage, as y.detach())
            if fn in _INPLACE_FLAG:
                args = torch.fx.node.map_arg(fx_node.args, lambda n: None)
                try:
                    inplace = inspect.signature(_INPLACE_FLAG[fn]).bind(*args, **fx_node.kwargs).arguments.get("inplace")
                except TypeError:
                    return None, False   # visit refuses the call
                if inplace:
                    return first, True
                if fn is F.dropout:   # an alias where it is the identity (inactive)
                    bound = inspect.signature(_dropout).bind(*args, **fx_node.kwargs).arguments
                    active = bound.get("training", True) and bound.get("p", 0.5) != 0
                    return (None, False) if active else (first, False)
                return None, False
        elif fx_node.op == "call_module":
            module = self.model.get_submodule(fx_node.target)
            if getattr(module, "inplace", False) is True:
                return first, True
            # Dropout is the identity (an alias) where inactive; in training a new tensor.
            if isinstance(module, nn.Identity) or (isinstance(module, nn.Dropout) and
                                                   (not module.training or module.p == 0)):
                return first, False
        return None, False

    def _augmented_assignments(self, fx_graph) -> set:
        """The fx nodes of `x op= y` (+=, -=, *=, /=, **=, //=, %=, ...): fx records them as
        operator.add etc., as it does `x = x + y`, but torch writes x in place, which another name
        bound to x sees. Told apart by the instruction the reference's innermost frame was running
        when fx made the node (_LocatingTracer.create_node): an in-place operation stored to a
        name, wherever the statement is (on lines of its own, after a `;`, in a one-line `if`, in
        a helper function of the file)."""
        return {n for n in fx_graph.nodes if n.meta.get(AUGMENTED)}

    def _check_writable(self, target, fx_node: torch.fx.Node) -> None:
        what = fx_node.target if isinstance(fx_node.target, str) else getattr(fx_node.target, "__name__", "op")
        if target is self.input_marker:
            raise self.refuse(f"an in-place {what} on the module's input (it would change the "
                              "caller's tensor); write the op out of place")
        if isinstance(target, _Marker) and target.kind in ("tensor", "matrix", "matrix_t"):
            owner, _, name = target.payload.rpartition(".")
            module = self.model.get_submodule(owner) if owner else self.model
            kind = "buffer" if name in dict(module.named_buffers(recurse=False)) else "parameter"
            raise self.refuse(f"an in-place {what} on the {kind} {target.payload} (it would "
                              "change the module's state); write the op out of place")

    def _join(self, receiver: torch.fx.Node, fx_node: torch.fx.Node) -> None:
        group = self.aliases.setdefault(receiver, [receiver])
        group.append(fx_node)
        self.aliases[fx_node] = group
        self.alias_parent[fx_node] = (receiver, _converts(fx_node))

    def _across_a_conversion(self, a: torch.fx.Node, b: torch.fx.Node) -> bool:
        """Whether aliases a and b are joined through a dtype conversion (x.float(), x.to(dtype)):
        the same tensor in a float32 module, a copy in a bf16 one."""
        def up(n):   # n and its receivers, each with whether its own step converts
            out = []
            while n is not None:
                parent, converts = self.alias_parent.get(n, (None, False))
                out.append((n, converts))
                n = parent
            return out
        up_a, up_b = up(a), up(b)
        common = {n for n, _ in up_a} & {n for n, _ in up_b}

        def crossed(chain):   # a converting step below the nearest common receiver
            for n, converts in chain:
                if n in common:
                    return False
                if converts:
                    return True
            return False
        return crossed(up_a) or crossed(up_b)

    def _write(self, receiver: torch.fx.Node, new, fx_node: torch.fx.Node) -> None:
        """An in-place op wrote `new` into the receiver: the receiver and every alias of it now
        hold it (later uses of the old fx values read the new value, as in torch)."""
        if fx_node.target == "detach_":
            # x.detach_() detaches that tensor only (a value, or a copy of the input: x.clone()): a
            # view of it (or a name sharing it through .contiguous(), .detach()) keeps the gradient
            # it had, which rebinding would drop
            if any(member is not receiver and any(self.order[u] > self.order[fx_node] for u in member.users)
                   for member in self.aliases.get(receiver, [receiver])):
                raise self.refuse(".detach_() of a value that another name shares (a view, .contiguous() or "
                                  ".detach() of it, read later): torch detaches that tensor alone; write "
                                  "y = x.detach()")
            self.env[receiver] = new
            return
        old = self.env[receiver]
        if isinstance(old, _Marker) and old.kind == "lead" and isinstance(new, _Marker) and new.kind == "lead":
            # (a value with the input's leading sizes written in place: its rows are, and every
            # alias of them in either form)
            old, new = old.payload, new.payload
        if not isinstance(old, _Id):
            raise self.refuse("an in-place op on a value kgen cannot write in place")
        if not isinstance(new, _Id):
            raise self.refuse("an in-place op whose result is not a tensor value")
        if self.shape_of(new) != self.shape_of(old):
            show = lambda s: shape_text(tuple("batch" if d == "M" else d for d in s))  # noqa: E731
            raise self.refuse(f"an in-place op that would change its target's shape from "
                              f"{show(self.shape_of(old))} to {show(self.shape_of(new))} (torch "
                              "refuses it too)")
        updates = {}
        for member in self.aliases.get(receiver, [receiver]):
            v = self.env[member]
            later = any(self.order[u] > self.order[fx_node] and _reads_values(u, member) for u in member.users)
            across = member is not receiver and self._across_a_conversion(member, receiver)
            if across and not later:
                continue   # (h = x.float(); h.mul_(...) where x is not read again: its copy or itself alike)
            if across:
                raise self.refuse("an in-place op on a value that shares its tensor with another through "
                                  ".float() / .to() / .type_as() (the same tensor in a float32 module, a copy "
                                  "in a bf16 one, so the other sees the write in one dtype only): write the op "
                                  "out of place")
            if isinstance(v, _Marker) and v.kind == "transposed" and not later:
                continue   # (a transposed view not read again: nothing to update)
            if isinstance(v, _Marker) and v.kind == "transposed":
                # (y.t() read after y.relu_(): it sees the write, where y.t().contiguous(), a
                # copy at all but one row, does not; which one a marker is, kgen does not know)
                raise self.refuse("an in-place op on a value whose transpose (x.T, x.t(), ...) is read after "
                                  "it; write the op out of place")
            if isinstance(v, _Id) and v == old:
                updates[member] = new
            elif isinstance(v, _Marker) and v.kind == "lead" and v.payload == old:
                updates[member] = _Marker("lead", new)
            elif isinstance(v, _Marker) and v.kind == "unsqueezed" and v.payload == old:
                updates[member] = _Marker("unsqueezed", new)
            elif isinstance(v, _Marker) and v.kind == "broadcast" and v.payload[0] == old:
                updates[member] = _Marker("broadcast", (new, *v.payload[1:]))   # (x.expand_as(y) of x)
            elif isinstance(v, _Id) and self.nodes[v].op == "detach" and self.nodes[v].args == (old,):
                # A detached alias (x.detach()) sees the new value, still detached.
                updates[member] = self.add("pointwise", self.level(new), [new], "detach")
                if self.level(new) == "full":
                    self.nodes[updates[member]].shape = self.nodes[new].shape
            else:
                raise self.refuse("an in-place op on a value that shares its storage with a "
                                  "detached or reshaped one (x.detach().mul_(2) and the like); "
                                  "write the op out of place")
        self.env.update(updates)

    def visit(self, fx_node: torch.fx.Node, args, kwargs):
        op = fx_node.op
        if self.leads and any(isinstance(v, _Marker) and v.kind in ("lead", "lead_t") for v in _leaves((args, kwargs))):
            return self._on_lead(fx_node, args, kwargs)
        if any(isinstance(v, _Marker) and v.kind == "tokens" for v in _leaves((args, kwargs))):
            return self._on_tokens(fx_node, args, kwargs)
        if any(isinstance(v, _Marker) and v.kind == "tokens_size" for v in _leaves((args, kwargs))):
            size = next(v for v in _leaves((args, kwargs)) if isinstance(v, _Marker) and v.kind == "tokens_size")
            raise self.refuse(f"x.size({'' if size.payload is None else size.payload}) of the module's "
                              f"{shape_text(tuple(self.ref.token_of))} input, of which its first GEMM reads one "
                              "token: kgen takes x[:, k] with k a number (the file runs on that token's (batch, "
                              "features) rows, whose sizes are the batch and the features alone)")
        if op in ("call_function", "call_method") and self._computes_a_weight(fx_node, args, kwargs):
            return _Marker("weight_expr", (fx_node, args, kwargs))
        return self._visit_op(fx_node, args, kwargs)

    def _replay(self, fx_node: torch.fx.Node, args, kwargs):
        """_visit_op of an earlier fx node (a weight_expr's), located there while it runs."""
        now = self.fx_node, self.where
        self.fx_node = fx_node
        self._locate(fx_node)
        try:
            return self._visit_op(fx_node, args, kwargs)
        finally:
            self.fx_node, self.where = now

    def _visit_op(self, fx_node: torch.fx.Node, args, kwargs):
        op = fx_node.op
        if op == "get_attr":
            return self.attribute(fx_node.target)
        if op == "call_module":
            return self.visit_module(fx_node.target, self.model.get_submodule(fx_node.target), args, kwargs)
        if op == "call_method":
            return self.visit_method(fx_node.target, args, kwargs)
        if op == "call_function":
            return self.visit_function(fx_node.target, args, kwargs)
        raise self.refuse(f"fx node kind {op}")

    def _dtype_cast(self, name: str, rest, kwargs) -> str | None:
        """What x.float() / x.to(...) / x.type(dtype) does to a value: "" nothing (a move to the
        device it is on, or to its own dtype), "to_float32" a cast to float32 (an upcast in a
        16-bit module: Tracer._fp32_cast), "module" a cast to the module's dtype (back from an
        upcast: Tracer._cast), None a change of dtype or device kgen does not take (the caller
        refuses it)."""
        if name == "float":
            return "to_float32" if not rest and not kwargs and self._fp32_cast(self.ref.input.dtype == torch.float32) \
                else None
        # x.to(x.device) and x.to(x.device, x.dtype) move nothing either (the value is on the
        # input's device), nor does a move to a device named ("cuda", self.device set in
        # __init__, torch.device(...)): the emitted forward runs where its input is, on the GPU,
        # as the module does there.
        rest = tuple(a for a in rest if not _names_a_device(a))
        # (copy=True: a new tensor of the same values, which the IR's values are; Tracer._aliasing
        # makes it no alias. memory_format: a (batch, features) value is contiguous either way)
        kwargs = {k: v for k, v in kwargs.items()
                  if not ((k == "device" and _names_a_device(v)) or (k in ("non_blocking", "copy") and isinstance(v, bool))
                          or (name == "to" and k == "memory_format"
                              and v in (torch.contiguous_format, torch.preserve_format)))}
        if name == "to" and not rest and not kwargs:
            return ""
        target = rest[0] if len(rest) == 1 and not kwargs else kwargs.get("dtype") if not rest and set(kwargs) == {"dtype"} else None
        if isinstance(target, _Marker) and target.kind == "dtype_of":
            return self._cast_to_dtype(target.payload)
        if name == "to" and len(rest) == 1 and not kwargs and self._dtype_of(target) is not None:
            # x.to(t): to t's dtype and device (the device is x's where the file runs), as x.type_as(t)
            return self._cast_to_dtype(self._dtype_of(target))
        if target is torch.float32:
            return "to_float32" if self._fp32_cast(self.ref.input.dtype == torch.float32) else None
        # A 16-bit dtype named (x.to(torch.bfloat16) in a bf16 module): refused as .bfloat16() is
        # (DTYPE_ALIAS_METHODS), not taken as the no-op it is in that dtype: the file runs float32
        # modules too, where eager's cast converts (its output bf16, kgen's float32).
        return None

    def _cast_to_dtype(self, dtype) -> str | None:
        """A cast to another value's dtype (x.to(y.dtype), x.type_as(y), x.to(y)): to the module's
        ("module"), or to float32, a value's after an upcast ("to_float32"), else None."""
        if dtype == self.ref.input.dtype:
            return "module"
        if dtype == torch.float32 and self._fp32_cast(False):
            return "to_float32"
        return None

    def _cast(self, value, cast: str):
        """`value` cast as _dtype_cast says: an upcast is a to_float32 node (the 16-bit build rounds
        nothing computed from it: Node.fp32), a cast back of a value eager holds in float32 a
        to_module_dtype node (rounded again); anything else is the value itself."""
        if cast == "to_float32" and isinstance(value, _Marker) and value.kind == "tensor" and self.gemm_id is not None:
            # (a parameter's upcast, Gemma's `1.0 + self.weight.float()`, F.layer_norm(h,
            # ..., self.weight.float()): eager computes with it in float32, as with a value's)
            value = self.value(value)
        if cast == "to_float32" and isinstance(value, _Id) and not self.nodes[value].fp32:
            return self.pointwise("to_float32", [value])
        if cast == "module" and isinstance(value, _Id) and self.nodes[value].fp32:
            return self.pointwise("to_module_dtype", [value])
        return value

    def _default_dtype_fact(self, what: str) -> None:
        """A value torch makes in its default dtype, float32, whatever the module's (`what`)."""
        self._float32_tensor_fact(f"{what} is a float32 tensor in torch (its default dtype)")

    def _float32_tensor_fact(self, what: str) -> None:
        """A float32 tensor the forward makes (`what`): it promotes a 16-bit y, so a 16-bit module
        computes on in float32 from there, which kgen's 16-bit build does not: a float32 fact
        (Graph.fp32_casts, as a cast to float32 left uncast is)."""
        self.fp32_casts.append((*self.where, f"{what}, which makes a 16-bit module compute on in float32"))

    def _fp32_cast(self, same: bool) -> bool:
        """A cast that names float32 (x.float(), x.to(torch.float32)), taken (Tracer._cast: a
        to_float32 node): in a float32 module a no-op (recorded: Graph.fp32_casts, unless a bf16
        conversion of the module casts it back, casts_that_stay_fp32); in a 16-bit module an upcast
        (recorded: Tracer.upcasts), taken where the forward casts back to the module's dtype before
        its output (check_upcasts)."""
        if same:
            self.fp32_casts.append(self.where)
            return True
        if self.ref.input.dtype in (torch.bfloat16, torch.float16):
            self.upcasts.append(self.where)
            return True
        return False

    def _factory_refusal(self, what: str, dtype, device, one_element: bool) -> str | None:
        """Why a tensor made in forward with dtype= / device= (torch.full_like(y, c, dtype=...),
        y.new_zeros(..., dtype=...)) is refused, None where it is taken: a device named is where
        the value is (the file runs on the GPU); a dtype the module's (dtype=y.dtype, or
        torch.float32 in a float32 module: Tracer._fp32_cast, as in a 16-bit module the float32
        tensor promotes what it meets); of a one-element (0-d) value any floating dtype, which
        promotes nothing (torch's rule for 0-d tensors) and holds the number as it is."""
        own = self.ref.input.dtype
        if device is not None and not _names_a_device(device):
            return f"{what} with device={device!r}"
        if dtype is None:
            return None
        if isinstance(dtype, _Marker) and dtype.kind == "dtype_of":
            dtype = dtype.payload if dtype.payload != own else None
            if dtype is None:
                return None
        if one_element and isinstance(dtype, torch.dtype) and dtype.is_floating_point:
            return None
        if dtype is torch.float32 and own == torch.float32:
            self._float32_tensor_fact(f"{what} with dtype=torch.float32 makes a float32 tensor")
            return None
        return (f"{what} with dtype={dtype} in a {own} module (kgen computes in the module's dtype, the one "
                "its input has where it runs; leave dtype out or write dtype=y.dtype)")

    def _dtype_of(self, v):
        """The dtype of an fx value: a parameter's own; the module's for a computed value, or
        float32 for one eager computes in float32 after an upcast (Node.fp32)."""
        if isinstance(v, _Marker) and v.kind in ("tensor", "matrix", "matrix_t"):
            return self._tensor(v.payload).dtype
        if isinstance(v, _Id) and self.nodes[v].fp32:
            return torch.float32
        if isinstance(v, _Id) or (isinstance(v, _Marker) and v.kind in ("input", "extra_input")):
            return self.ref.input.dtype   # (an extra input has the input's dtype: Reference._extra_input)
        return None

    def _softmax_args(self, args, kwargs) -> dict:
        """softmax's arguments; a dtype other than the module's (the output in another dtype) refused."""
        a = self._bind(_softmax, args, kwargs)
        self._output_dtype(a, "softmax")
        return a

    def _output_dtype(self, a: dict, what: str) -> None:
        """A softmax's or reduction's dtype= argument: the module's own (a float32 named makes the
        file run fp32 modules only: Tracer._fp32_cast), or refused (the output in another dtype)."""
        if isinstance(a["dtype"], _Marker) and a["dtype"].kind == "dtype_of":
            a["dtype"] = None if a["dtype"].payload == self.ref.input.dtype else a["dtype"].payload
        if a["dtype"] is torch.float32 and self._fp32_cast(a["dtype"] == self.ref.input.dtype):
            # (softmax(x, dtype=torch.float32): the op of x cast to float32, as torch computes it)
            a["dtype"], a["input"] = None, self._cast(a["input"], "to_float32")
        if a["dtype"] is not None and a["dtype"] != self.ref.input.dtype:
            raise self.refuse(f"{what} with dtype={a['dtype']} on a {self.ref.input.dtype} module (its output "
                              "in another dtype than the module's; kgen's outputs are in the module's dtype)")

    def _check_input(self, a):
        if isinstance(a, _Marker) and a.kind == "input" and self.gemm_id is None:
            if self.trying_deferral:
                raise _BeforeTheGemm(str(self.refuse(INPUT_BEFORE_THE_GEMM)))   # (Tracer.run defers the op)
            self.prologue()
        if isinstance(a, _Marker) and a.kind == "extra_input" and (self.gemm_id is None or self.in_prologue()):
            raise _BeforeTheGemm(str(self.refuse(EXTRA_INPUT_BEFORE_THE_GEMM)))

    def prologue(self) -> None:
        """Ops on the module's input whose value the first GEMM reads (`self.fc(self.ln(x))`, a
        pre-norm block's LayerNorm or RMSNorm, `fc(relu(x))`): a part of their own before the first
        GEMM part, a prologue, whose "GEMM" is the identity (a gemm node with attribute `identity`:
        z is the input itself, (batch, in_features)), so that its ops are a part's epilogue as any
        (docs/design.md, Chained GEMMs). The GEMM that reads its value closes it (Tracer.chain)."""
        inp = self.ref.input
        if inp.dim() != 2 or inp.dtype not in MODULE_DTYPES:
            raise self.refuse(f"the input is {inp.dtype} of shape {tuple(inp.shape)}; kgen's ops before the GEMM "
                              "take one (batch, in_features) tensor of float32, bfloat16 or float16 (or "
                              "(..., in_features), a Linear over its last dimension)")
        self.out_features = self.in_features
        self.gemm_id = self.add("gemm", "tile", weight=None, identity=True)

    def in_prologue(self) -> bool:
        """Whether the part being traced is a prologue (Tracer.prologue), not a GEMM's."""
        return self.gemm_id is not None and bool(self.nodes[self.gemm_id].attrs.get("identity"))

    def visit_module(self, path: str, module: nn.Module, args, kwargs):
        kind = _torch_kind(module)
        if kwargs:
            # A module called by keyword (self.fc(input=x)): its forward's own order of arguments.
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs)
            except TypeError as e:
                raise self.refuse(f"self.{path} called with arguments its forward does not take ({e})") from None
            args, kwargs = tuple(bound.args), dict(bound.kwargs)
        if len(args) != 1 or kwargs:
            raise self.refuse(f"self.{path} called with more than its input")
        if kind is nn.Linear:
            return self.gemm(args[0], f"{path}.weight", f"{path}.bias" if module.bias is not None else None)
        if kind is nn.Flatten:
            return self.visit_method("flatten", (args[0], module.start_dim, module.end_dim), {})
        if kind is nn.PReLU:
            return self.prelu(args[0], self.attribute(f"{path}.weight"))
        known = (*ACTIVATION_MODULES, *COMPOSITE_MODULES, nn.ReLU6, nn.Softmax, nn.LogSoftmax, nn.Softmin,
                 nn.BatchNorm1d, nn.Dropout, nn.GroupNorm, nn.LayerNorm, nn.RMSNorm, nn.MaxPool1d, nn.AvgPool1d,
                 nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d, nn.RReLU, nn.AlphaDropout, nn.FeatureAlphaDropout,
                 nn.InstanceNorm1d, nn.GLU)
        if kind not in known:
            raise self.refuse(f"the module self.{path} ({kind.__module__}.{kind.__name__}) is not supported")
        if kind is nn.Identity or (kind is nn.Dropout and module.p == 0):
            return args[0]   # (the identity: of the input too, as torchvision's heads write `avgpool = nn.Identity()`)
        for a in args:
            self._check_input(a)
        if kind in ACTIVATION_MODULES:
            name, attr_map = ACTIVATION_MODULES[kind]
            return self.pointwise(name, [args[0]], {k: getattr(module, v) for k, v in attr_map.items()})
        if kind in COMPOSITE_MODULES:
            name, attr_map = COMPOSITE_MODULES[kind]
            return self.composite(name, args[0], **{k: getattr(module, v) for k, v in attr_map.items()})
        if kind is nn.ReLU6:
            return self.pointwise("hardtanh", [args[0]], {"min_val": 0.0, "max_val": 6.0})
        if kind is nn.Softmin:
            return self.reduce("softmax", self.pointwise("neg", [args[0]]), module.dim, True)
        if kind in (nn.Softmax, nn.LogSoftmax):
            return self.reduce("softmax" if kind is nn.Softmax else "log_softmax", args[0], module.dim, True)
        if kind is nn.BatchNorm1d:
            return self.batchnorm(args[0], path, module)
        if kind is nn.RMSNorm:
            return self.rms_norm(args[0], tuple(module.normalized_shape),
                                 f"{path}.weight" if module.weight is not None else None, module.eps)
        if kind is nn.LayerNorm:
            return self.layer_norm(args[0], tuple(module.normalized_shape), module.weight is not None and f"{path}.weight",
                                   module.bias is not None and f"{path}.bias", module.eps)
        if kind is nn.GroupNorm:
            affine = module.affine
            return self.group_norm(args[0], module.num_groups, f"{path}.weight" if affine else None,
                                   f"{path}.bias" if affine else None, module.eps,
                                   module.num_channels)
        if kind is nn.MaxPool1d:
            return self.pool("max", args[0], module.kernel_size, module.stride, module.padding,
                             module.ceil_mode, module.dilation, module.return_indices)
        if kind is nn.AvgPool1d:
            return self.pool("avg", args[0], module.kernel_size, module.stride, module.padding,
                             module.ceil_mode)
        if kind in (nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d):
            return self.adaptive_pool("avg" if kind is nn.AdaptiveAvgPool1d else "max", args[0], module.output_size,
                                      getattr(module, "return_indices", False))
        if kind is nn.Dropout:
            return self.dropout(args[0], module.p, module.training, path)
        if kind is nn.RReLU:
            return self.rrelu(args[0], module.lower, module.upper, module.training, path)
        if kind in (nn.AlphaDropout, nn.FeatureAlphaDropout):
            return self.alpha_dropout(args[0], module.p, module.training, path, kind is nn.FeatureAlphaDropout)
        if kind is nn.InstanceNorm1d:
            return self.instance_norm_module(args[0], path, module)
        if kind is nn.GLU:
            return self.glu(args[0], module.dim)
        raise self.refuse(f"the module {path} ({kind.__module__}.{kind.__name__}) is not supported")

    def _records_gradient(self, value) -> bool:
        """Whether torch's autograd records an op on `value`: it is computed, other than through a
        detach, from the GEMM, the module's input or a parameter that wants a gradient (a buffer
        does not; a value kgen reads as a marker is taken to)."""
        if isinstance(value, _Marker) and value.kind in ("tensor", "matrix") and isinstance(value.payload, str):
            return self._tensor(value.payload).requires_grad   # (a parameter or buffer read as it is)
        if isinstance(value, _Marker) and value.kind == "input":
            return not value.payload   # (the module's input; x.detach() of it records nothing)
        if isinstance(value, _Marker) and value.kind == "extra_input":
            return not value.payload[1]
        if not isinstance(value, _Id):
            return isinstance(value, _Marker)
        stack, seen = [int(value)], set()
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            n = self.nodes[i]
            if n.kind == "pointwise" and n.op == "detach":
                continue
            if n.kind == "gemm" or (n.kind == "input" and not n.attrs.get("detached")):
                return True
            if n.kind == "param" and self._tensor(n.attrs["path"]).requires_grad:
                return True
            stack.extend(n.args)
        return False

    def _depends(self, node: int, on: int) -> bool:
        stack, seen = [node], set()
        while stack:
            i = stack.pop()
            if i == on:
                return True
            if i not in seen:
                seen.add(i)
                stack.extend(self.nodes[i].args)
        return False

    def _flatten_row(self, x, name: str, rest, kwargs):
        """A (M, 1) row value as (M,) by squeeze(1) or flatten() (view and reshape: Tracer._view)
        — the value keepdim=False would have given. squeeze() with no dim (a batch of 1 would go
        too) only as the module's last op (Graph.output_tail)."""
        if name == "flatten":
            # flatten(start_dim, end_dim) of a (batch, 1) value: from dim 0, the (batch,) value;
            # from dim 1 (flatten(1), start_dim=1, nn.Flatten()), itself, (batch, 1) as in torch.
            # (start_dim= given by keyword was read as flatten(): a (batch,) output for torch's
            # (batch, 1).)
            try:
                a = inspect.signature(lambda start_dim=0, end_dim=-1: None).bind(*rest, **kwargs).arguments
            except TypeError:
                a = None
            start, end = (a or {}).get("start_dim", 0), (a or {}).get("end_dim", -1)
            if a is not None and start in (0, -2, 1, -1) and end in (1, -1) and type(start) is int and type(end) is int:
                return x if start in (1, -1) else self._relevel(x, "rowflat")
            given = tuple(rest) + tuple(kwargs.values())
            raise self.refuse(f".flatten{given if len(given) != 1 else '(' + repr(given[0]) + ')'} of a "
                              "(batch, 1) value; kgen takes flatten(), flatten(0) (the (batch,) value) and "
                              "flatten(1) (the value itself)")
        ok = {"squeeze": [(1,), (-1,)]}[name]
        given = tuple(rest) + tuple(kwargs.get(k) for k in ("dim",) if k in kwargs)
        if name == "squeeze" and given == () and self._feeds_the_output_only():
            # the module's output: torch's own squeeze() after the kernel, which at a batch of 1
            # gives a 0-d tensor, as the reference's does
            self._tail("squeeze")
            return self._relevel(x, "rowflat")
        if given not in ok:
            raise self.refuse(f".{name}{given if len(given) != 1 else '(' + repr(given[0]) + ')'} of a "
                              "(batch, 1) value; kgen takes squeeze(1), view(-1), reshape(-1) and flatten() "
                              "(the (batch,) value keepdim=False gives), and squeeze() as the forward's last op")
        return self._relevel(x, "rowflat")

    def _relevel(self, x: int, level: str) -> int:
        """A per-row value x, (M, 1) or (M,), as the other of the two (`level`: row or rowflat):
        the same floats, another shape. A (batch, features) value of one feature (a GEMM of
        N = 1) is first made a per-row value: its max over the one feature, itself exactly."""
        if self.level(x) == "tile":
            assert self.out_features == 1, self.nodes[x]
            x = self.reduce("max", x, -1, True)
        node = self.nodes[x]
        receiver = self.fx_node.args[0] if self.fx_node.args else None
        if (node.kind == "reduce" and x == len(self.nodes) - 1 and isinstance(receiver, torch.fx.Node)
                and len(receiver.users) == 1):
            # The reduction's only use: it is the reduction with the other keepdim (one IR for
            # both spellings).
            node.level = level
            return x
        return self.add("pointwise", level, [x], "identity")

    # ---- sizes and views of values --------------------------------------------------------
    def _shape_or_none(self, v) -> tuple | None:
        """The shape of a value (the module's input or a node), "M" for the batch; None for
        anything else (a parameter's views are Tracer.param_view's)."""
        if isinstance(v, _Marker) and v.kind in ("input", "scaled_input"):   # (x * 2: the input's shape)
            return ("M", *tuple(self.ref.input.shape)[1:])
        if isinstance(v, _Marker) and v.kind == "extra_input":
            return ("M", int(self.ref.extra_inputs[v.payload[0] - 1].shape[-1]))
        if isinstance(v, _Id):
            return tuple(self.shape_of(v))
        if isinstance(v, _Marker) and v.kind == "unsqueezed":
            return ("M", 1, self.shape_of(v.payload)[1])
        if isinstance(v, _Marker) and v.kind == "windows":
            width, k = self.shape_of(v.payload[0])[1], v.payload[1]
            return ("M", width // k, k)
        if isinstance(v, _Marker) and v.kind == "group":
            tag, x, k, _ = v.payload
            width = self.shape_of(x)[1]
            return ("M", width // k, 1 if tag in ("mean", "var", "var_eps", "std", "rstd") else k)
        return None

    def _transpose_of(self, v):
        """The transpose of a (batch, features) activation (x.T, x.t(), x.transpose(0, 1)): a
        marker only W @ x.T takes, whose result is the GEMM's transpose (Tracer.visit_function);
        the transpose of such a marker is its value again. None for anything else (a parameter's
        transposes are its views; an input of more dimensions, whose .T is no matrix's)."""
        if isinstance(v, _Marker) and v.kind == "transposed":
            return v.payload
        if isinstance(v, _Marker) and v.kind == "input" and self.ref.rows_of is not None:
            return None
        shape = self._shape_or_none(v) if isinstance(v, _Id) or (isinstance(v, _Marker) and v.kind == "input") else None
        return _Marker("transposed", v) if shape is not None and len(shape) == 2 else None

    def _known_shape(self, v) -> tuple | None:
        """_shape_or_none, and the shape of a value of a part closed before the last GEMM (its
        sizes are numbers like any other value's, though the value itself is out of reach)."""
        if isinstance(v, _Marker) and v.kind == "earlier":
            return v.shape
        return self._shape_or_none(v)

    def _size(self, d):
        """One size of a value's shape: a Python int, or for the batch a marker (the emitted file
        runs at any batch, so the batch is no number the trace may bake in)."""
        if d == "M":
            return _Marker("batch", None)
        if isinstance(d, _Marker):   # (a leading size of the input: Tracer._lead_shape)
            return d
        self.sizes_read.append(self.where)   # (the number is baked in: Graph.sizes_read)
        return int(d)

    def _mask_of(self, x, index):
        """The comparison (op, lhs, rhs) of `index` where it is a bool mask of x's shape (x a
        (batch, features) value, the comparison of such values: y[y < 0], y[self.mask]); None
        where it is no mask."""
        cond = self._condition(index)
        if not (isinstance(cond, _Marker) and cond.kind == "comparison" and isinstance(x, _Id)):
            return None
        if self.level(x) != "tile" or not any(isinstance(v, _Id) and self.level(v) == "tile" for v in cond.payload[1:]):
            raise self.refuse("a mask whose shape is not its value's (kgen takes y[mask] with mask a comparison "
                              "of (batch, features) values, y's shape)")
        return cond.payload

    def float_class(self, kind: str, v, *rest, **kwargs):
        """torch.isnan(v) / isinf(v) / isfinite(v) of a value: the comparison it is (a condition for
        where, masked_fill, y[mask] = c; 1 and 0 as a value), FLOAT_CLASS_FUNCTIONS."""
        if rest or kwargs:
            raise self.refuse(f"torch.{kind} with arguments other than the tensor")
        if not isinstance(v, _Id):
            self.value(v)   # (refused, naming what it is)
        if kind == "isnan":
            return _Marker("comparison", ("ne", v, v))
        magnitude = self.pointwise("abs", [v])
        return _Marker("comparison", ("eq" if kind == "isinf" else "lt", magnitude, math.inf))

    def _one_element(self, v) -> bool:
        """Whether v is a parameter or buffer of one element (a 0-d scale, self.s)."""
        return isinstance(v, _Marker) and v.kind in ("tensor", "matrix") and isinstance(v.payload, str) \
            and self._tensor(v.payload).numel() == 1

    def masked_assign(self, target, index, value):
        """y[mask] = v (operator.setitem, as fx records it with unseen_by_fx_refused's patch): torch.where(
        mask, v, y), written into y (Tracer.run: an in-place op). v: a number, or an element-wise
        expression of values selected by the same mask (y[m] = 0.1 * y[m]; y[m] *= 0.1)."""
        mask = self._mask_of(target, index)
        if mask is None:
            raise self.refuse("an assignment into a value's elements (y[...] = v) other than by a mask of its "
                              "shape (y[y < 0] = 0); write it with torch.where or an op")
        if isinstance(value, _Marker) and value.kind == "masked":
            if value.payload[1] != mask:
                raise self.refuse("y[mask] = v where v was selected by another mask")
            value = value.payload[0]
        elif not _is_number(value):
            raise self.refuse("y[mask] = v with v other than a number or an element-wise expression of "
                              "values selected by the same mask (y[m] = 0.1 * y[m])")
        compare, lhs, rhs = mask
        return self.pointwise("where", [lhs, rhs, value, target], {"compare": compare})

    # ---- an input of more dimensions traced with its leading sizes (Tracer.leads) ----------
    # A value as the forward has it with the input's leading sizes, (B, S, ...): _Marker("lead",
    # v), v its rows' value (M, ...), the IR's; _Marker("lead_t", v): its last two dimensions
    # swapped (h.transpose(1, 2), (B, N, S)), which BatchNorm1d and W @ x.mT take.
    def _lead_shape(self, v: _Marker) -> tuple:
        """The shape of a lead value: the input's leading sizes (markers), then its rows' others."""
        rows = self._shape_or_none(v.payload)
        if rows is None:
            raise self.refuse("a value with the input's leading sizes kgen has no shape for")
        return (*(_Marker("lead_size", frozenset({i})) for i in range(self.leads)), *rows[1:])

    def _lead_view(self, x, sizes: tuple, call: str):
        """A view between a value's rows, (M, ...), and its form with the input's leading sizes,
        (B, S, ...): x.view(B * S, D), x.reshape(-1, D), h.view(B, S, -1), h.view(*x.shape[:-1], -1)
        (one size may be -1). Of the same elements in the same order (both contiguous), so the
        IR's value is the rows' either way; any other view is refused."""
        rows = x.payload if isinstance(x, _Marker) and x.kind == "lead" else x
        own = self._shape_or_none(rows)
        key = lambda d: ("lead", d.payload) if isinstance(d, _Marker) and d.kind == "lead_size" else (  # noqa: E731
            "M" if isinstance(d, _Marker) and d.kind == "batch" else d)
        target = tuple(key(d) for d in sizes)
        leads = tuple(("lead", frozenset({i})) for i in range(self.leads))

        def matches(want: tuple) -> bool:
            if len(target) != len(want):
                return False
            differ = [i for i, (t, w) in enumerate(zip(target, want)) if t != w]
            return not differ or (len(differ) == 1 and target[differ[0]] == -1)

        if own is not None and matches(("M", *own[1:])):
            return rows
        if own is not None and matches((*leads, *own[1:])):
            return _Marker("lead", rows)
        if isinstance(rows, _Id) and own is not None and len(own) == 2 and len(target) == self.leads + 2 \
                and target[:self.leads] == leads:
            # h.view(B, S, H, -1): the rows' heads, the (M, H, k) view a 2-d module writes as
            # h.view(b, H, -1) (Tracer._view: windows that a GroupNorm written out or a pooling
            # takes), with the leading sizes (a pooling's result is the rows' pooled value)
            return _Marker("lead", self._view(rows, call, (("M", *target[self.leads:]),), {}))
        if isinstance(x, _Marker) and x.kind in ("group", "windows") and len(target) == self.leads + 1 \
                and target[:self.leads] == leads:
            # ... and back, g.view(B, S, -1): the 2-d view back to (M, N), with the leading sizes
            return _Marker("lead", self._view(x, call, (("M", target[-1]),), {}))
        def text(t) -> str:   # (a size as the forward reads it)
            if t == "M" or isinstance(t, tuple):
                return " * ".join(f"x.size({i})" for i in sorted(t[1] if isinstance(t, tuple) else range(self.leads)))
            return repr(t)

        rows_shown = f"({', '.join(text(d) for d in own)})" if own else "not known"
        raise self.refuse(f"{call}({', '.join(text(t) for t in target)}) of a value whose rows are {rows_shown} (the input "
                          f"is {tuple(self.ref.rows_of)}: kgen takes its rows, view(-1, N) / flatten(0, "
                          f"{self.leads - 1}), and their view back to the input's leading sizes)")

    def _lead_output(self, output):
        """The forward's output where the input is traced with its leading sizes: a lead value is
        its rows (the emitted forward reshapes them back, trace.rows_output); the rows themselves
        returned (B * S, N) are refused, which kgen would give back in the leading sizes."""
        if isinstance(output, _Marker) and output.kind == "lead":
            return output.payload
        if isinstance(output, _Id) and self.output_tail and self.output_tail[0] in WHOLE_REDUCTIONS.values():
            return output   # (one number: x.sum() of the rows)
        if isinstance(output, _Id) or (isinstance(output, _Marker) and output.kind in ("unsqueezed", "windows")):
            raise self.refuse(f"the forward returns the rows of its {tuple(self.ref.rows_of)} input, (B * S, ...): kgen "
                              "gives the output back in the input's leading sizes; view it back (h.view(B, S, -1))")
        return output

    def _rows_dim(self, dim, what: str):
        """The dim an op of a lead value (_on_lead) is given, as the same op of its rows takes it:
        the last dimension (-1, or rank - 1) is the rows' features, -1; any other (a leading size,
        or any dim of a (B, S) value) is refused. Without leading sizes, dim itself."""
        if not self.lead_rank or dim is None:
            return dim
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if self.lead_rank > self.leads and all(type(d) is int and d in (-1, self.lead_rank - 1) for d in dims):
            return type(dim)(-1 for _ in dims) if isinstance(dim, (tuple, list)) else -1
        raise self.refuse(f"{what} over dim={dim!r} of a value of {self.lead_rank} dimensions, the input's leading sizes "
                          "first (kgen computes on its rows: over the last dimension, dim=-1)")

    def _on_lead(self, fx_node, args, kwargs):
        """An op of values with the input's leading sizes (Tracer.leads): sizes, views to and from
        the rows and the transpose of the last two dimensions here; any other op is the same op of
        the rows (point-wise ops, the GEMM, ops over the last dimension: _rows_dim maps the dims
        given), its result again with the leading sizes. Ops whose meaning depends on the other
        dimensions (channels at dim 1, views and indexing) are refused."""
        op, target = fx_node.op, fx_node.target
        name = target if op == "call_method" else getattr(target, "__name__", str(target)) if op == "call_function" else ""
        if op == "call_function" and target is getattr:
            name = args[1]
        if op == "call_module":
            name = type(self.model.get_submodule(target)).__name__
        first = args[0] if args else next(iter(kwargs.values()), None)
        leads = [v for v in _leaves((args, kwargs)) if isinstance(v, _Marker) and v.kind in ("lead", "lead_t")]
        if isinstance(first, _Marker) and first.kind == "lead" and self._shape_or_none(first.payload) is not None:
            rank = len(self._lead_shape(first))
            if name in ("size", "shape", "dim", "ndim", "ndimension"):
                shape = self._lead_shape(first)
                if name in ("dim", "ndim", "ndimension"):
                    return len(shape)
                if name == "size" and (args[1:] or kwargs):
                    dim = args[1] if len(args) > 1 else kwargs.get("dim")
                    return self.visit_function(operator.getitem, (_Marker("shape", shape), dim), {})
                return _Marker("shape", shape)
            if name in ("view", "reshape"):
                sizes = kwargs.get("shape", kwargs.get("size", args[1] if len(args) == 2 else args[1:]))
                if isinstance(sizes, _Marker) and sizes.kind == "shape":
                    sizes = sizes.payload
                return self._lead_view(first, tuple(sizes) if isinstance(sizes, (tuple, list)) else (sizes,), name)
            if name == "flatten":
                a = self._bind(lambda input, start_dim=0, end_dim=-1: None, args, kwargs)
                span = (a["start_dim"] % rank, a["end_dim"] % rank) if all(
                    type(d) is int for d in (a["start_dim"], a["end_dim"])) else None
                if span == (0, self.leads - 1):
                    return first.payload   # (flatten(0, 1): the rows)
                raise self.refuse(f"flatten({a['start_dim']!r}, {a['end_dim']!r}) of a value of {rank} dimensions, the "
                                  f"input's leading sizes first (kgen takes flatten(0, {self.leads - 1}): its rows)")
            if self._swaps_last_two(name, args, kwargs, rank) and (
                    first.payload is self.input_marker or (isinstance(first.payload, _Id) and self.level(first.payload) == "tile")):
                return _Marker("lead_t", first.payload)
        if isinstance(first, _Marker) and first.kind == "lead_t":
            if self._swaps_last_two(name, args, kwargs, self.leads + 1):
                return _Marker("lead", first.payload)
            if op == "call_module" and _torch_kind(self.model.get_submodule(target)) is nn.BatchNorm1d and len(args) == 1:
                # BatchNorm1d of h.transpose(1, 2), (B, N, S): the N features are its channels, each
                # normalized over B and S, the rows: BatchNorm1d of the rows
                bn = self.batchnorm(first.payload, target, self.model.get_submodule(target))
                self.nodes[bn].attrs["sequence"] = True   # (torch's errors name its (B, N, S) input)
                return _Marker("lead_t", bn)
        if (op == "call_function" and target in MATMUL_FUNCTIONS) or name in ("matmul", "__matmul__"):
            w, x = (args + (None, None))[:2]
            if isinstance(x, _Marker) and x.kind == "lead_t" and isinstance(w, _Marker) and w.kind in ("matrix", "matrix_t"):
                # W @ x.mT of the input with its leading sizes: the GEMM's transpose, (B, N, S)
                z = self.visit_function(torch.matmul, (w, _Marker("transposed", x.payload)), {})
                return _Marker("lead_t", z.payload if isinstance(z, _Marker) else z)
        if op == "call_function" and target is torch.einsum and isinstance(first, str):
            return self._lead_einsum(args, kwargs)
        swapped = {v.kind for v in leads} == {"lead_t"}   # (an op of transposed values alone)
        if swapped and name in LEAD_SHAPE_OPS:
            raise self.refuse(f"{name} of a value with the input's leading sizes and its last two dimensions swapped "
                              "(kgen takes it in BatchNorm1d, the features as its channels, in element-wise ops, "
                              "and transposed back)")
        if name in LEAD_SHAPE_OPS or (not swapped and any(v.kind == "lead_t" for v in leads)):
            raise self.refuse(f"{name} of a value with the input's leading sizes (the input is {tuple(self.ref.rows_of)}: "
                              "kgen takes ops over its last dimension, and its rows, view(-1, N), and back)")
        rows = [v for v in _leaves((args, kwargs)) if isinstance(v, _Id) and self.level(v) not in ("scalar", "col", "free")
                or (isinstance(v, _Marker) and v.kind == "input")]
        if rows:
            raise self.refuse(f"{name} of a value with the input's leading sizes and one of its rows (B * S, ...) (torch "
                              "broadcasts them otherwise, or refuses)")
        unwrap = lambda v: v.payload if isinstance(v, _Marker) and v.kind in ("lead", "lead_t") else v  # noqa: E731
        # (the operand a dim is of: the first whose shape is known, a value's, not a zeros_like's)
        shaped = next((v for v in leads if self._shape_or_none(v.payload) is not None), leads[0])
        rank = len(self._lead_shape(shaped))
        # (no dim given to an op of a (B, S) value, or of a transposed one, is the rows' features)
        rowflat = swapped or (isinstance(shaped.payload, _Id) and self.level(shaped.payload) == "rowflat")
        kept, self.lead_rank = self.lead_rank, (self.leads if rowflat else rank)
        first_node = len(self.nodes)
        try:
            result = self._visit_op(fx_node, *torch.fx.node.map_aggregate((args, kwargs), unwrap))
        finally:
            self.lead_rank = kept
        if swapped and not (isinstance(result, _Id) and self.level(result) == "tile" and all(
                n.kind in ("pointwise", "const") or (n.kind == "param" and n.level == "scalar") for n in self.nodes[first_node:])):
            raise self.refuse(f"{name} of a value with its last two dimensions swapped (kgen takes it in BatchNorm1d, "
                              "in element-wise ops with numbers, and transposed back)")
        if isinstance(result, _Id) or (isinstance(result, _Marker) and result.kind in LEAD_VALUE_KINDS):
            return _Marker("lead_t" if swapped else "lead", result)
        if isinstance(result, _Marker) and result.kind in ("pair", "values_indices"):
            return _Marker(result.kind, torch.fx.node.map_aggregate(
                result.payload, lambda v: _Marker("lead", v) if isinstance(v, _Id) else v))
        return result

    def _swaps_last_two(self, name: str, args, kwargs, rank: int) -> bool:
        """Whether the op swaps the last two dimensions of a value of `rank` (transpose(1, 2),
        transpose(-1, -2), swapaxes, permute(0, 2, 1), .mT)."""
        if name == "mT":
            return True
        rest = tuple(args[1:])
        if name in ("transpose", "swapaxes", "swapdims") and len(rest) == 2 and not kwargs:
            return all(type(d) is int for d in rest) and {d % rank for d in rest} == {rank - 2, rank - 1}
        if name == "permute" and not kwargs:
            dims = tuple(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            return all(type(d) is int for d in dims) and tuple(d % rank for d in dims) == (*range(rank - 2), rank - 1, rank - 2)
        return False

    def _lead_einsum(self, args, kwargs):
        """torch.einsum whose first operand has the input's leading sizes ('bsi,oi->bso'): those
        letters leading the operand and the output, and nowhere else, are its rows, '...'
        (einsum_form: 'bsi,oi->bso' is '...i,oi->...o', the GEMM)."""
        equation = args[0].replace(" ", "")
        lhs, _, out = equation.partition("->")
        terms = lhs.split(",")
        lead = terms[0][:self.leads]
        if len(terms) == 2 and "." not in equation and len(set(lead)) == self.leads and out.startswith(lead) \
                and not set(lead) & set(terms[0][self.leads:] + terms[1] + out[self.leads:]):
            equation = f"...{terms[0][self.leads:]},{terms[1]}->...{out[self.leads:]}"
        operands = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else tuple(args[1])
        if not operands or not (isinstance(operands[0], _Marker) and operands[0].kind == "lead") or \
                any(isinstance(v, _Marker) and v.kind in ("lead", "lead_t") for v in operands[1:]):
            raise self.refuse(f"torch.einsum({args[0]!r}, ...) of values with the input's leading sizes (kgen takes "
                              "'bsi,oi->bso', the GEMM of the first operand's rows)")
        kept, self.lead_rank = self.lead_rank, len(self._lead_shape(operands[0]))
        try:
            result = self.einsum((equation, operands[0].payload, *operands[1:]), kwargs)
        finally:
            self.lead_rank = kept
        return _Marker("lead", result) if isinstance(result, _Id) else result

    def _on_masked(self, fx_node, args, kwargs):
        """An op on values selected by one mask (y[m], Tracer._mask_of): the op on the whole values,
        still selected by that mask, where it is element-wise (every node it adds point-wise);
        anything else of a masked selection (a reduction, the output) is refused."""
        masks = {v.payload[1] for v in (*args, *kwargs.values()) if isinstance(v, _Marker) and v.kind == "masked"}
        if len(masks) > 1:
            raise self.refuse("an op on values selected by different masks")
        for v in (*args, *kwargs.values()):
            # torch's y[mask] is 1-d, one entry per element selected: an element-wise op of it takes
            # numbers, one-element tensors and selections by the same mask, and fails on the rest
            tensor = (isinstance(v, _Id) and self.level(v) != "scalar") or (
                isinstance(v, _Marker) and v.kind != "masked" and not self._one_element(v))
            if tensor:
                raise self.refuse("values selected by a mask (y[mask], 1-d in torch) in an op with a tensor of "
                                  "another shape (torch refuses it: select it by the same mask)")
        unwrap = lambda v: v.payload[0] if isinstance(v, _Marker) and v.kind == "masked" else v  # noqa: E731
        first = len(self.nodes)
        result = self._finished(fx_node, self.visit(fx_node, [unwrap(a) for a in args],
                                                    {k: unwrap(v) for k, v in kwargs.items()}))
        if not isinstance(result, _Id) or self.level(result) != "tile" or any(
                n.kind not in ("pointwise", "const") and not (n.kind == "param" and n.level == "scalar")
                for n in self.nodes[first:]):
            raise self.refuse("values selected by a mask (y[y < 0]) used other than in an element-wise "
                              "expression assigned back by the same mask (y[m] = 0.1 * y[m]); write it "
                              "with torch.where")
        return _Marker("masked", (result, next(iter(masks))))

    def _on_tokens(self, fx_node: torch.fx.Node, args, kwargs):
        """An op of the (batch, tokens, features) input whose first GEMM reads one token of it
        (Reference.token_of, _Marker("tokens", the input)): the selection of that token (x[:, 0],
        x[:, -1, :], x.select(1, k), torch.select(x, 1, k)) is the (batch, features) input the
        workload is; contiguous / clone / detach of the input are the input still, its batch, dtype
        and device what they are for the rows. Anything else reads other tokens, or the tokens'
        number, which kgen's rows do not hold, and is refused."""
        name = fx_node.target if isinstance(fx_node.target, str) else getattr(fx_node.target, "__name__", str(fx_node.target))
        first = args[0] if args else None
        tokens = first if isinstance(first, _Marker) and first.kind == "tokens" else None
        shape = shape_text(tuple(self.ref.token_of))
        rest = [v for v in (*args[1:], *kwargs.values())]
        selects = fx_node.target in (operator.getitem, torch.select) or (
            fx_node.op == "call_method" and name in ("__getitem__", "select"))
        same = fx_node.op == "call_method" and name in (*IDENTITY_METHODS, "detach") and not args[1:] and not kwargs
        # (what the rows have as the input has it: the batch, dtype and device)
        described = (fx_node.op == "call_method" and name in ("size", "dim", "ndimension")) or (
            fx_node.target is getattr and args[1:] and args[1] in ("dtype", "device", "is_cuda"))
        if tokens is None or any(isinstance(v, _Marker) and v.kind == "tokens" for v in _leaves(rest)) or not (
                selects or same or described):
            raise self.refuse(f"{name} of the module's {shape} input as it is: kgen takes the input of a "
                              f"(batch, tokens, features) module through the selection of one token before the "
                              f"first GEMM (x[:, k], x.select(1, k), k a number), the (batch, features) rows that "
                              "GEMM reads, and nothing else of it")
        inner = tokens.payload
        if same:
            return _Marker("tokens", _Marker("input", True)) if name == "detach" else tokens
        if described:
            dim = args[1] if name == "size" and len(args) > 1 else kwargs.get("dim")
            if name == "size" and (dim is None or not isinstance(dim, int) or dim % 3 != 0):
                # (made by every x.shape / x.size(d) while fx traces, used or not: refused where used)
                return _Marker("tokens_size", dim)
            if name in ("dim", "ndimension"):
                return 3
            return self._visit_op(fx_node, [inner, *args[1:]], kwargs)
        position = self._selected_position(fx_node, name, args, kwargs)
        if position is None:
            raise self.refuse(f"{name} of the module's {shape} input: kgen takes the selection of one token "
                              "before the first GEMM (x[:, 0], x[:, -1, :], x.select(1, k), k a number), not a "
                              "slice of several tokens, a position that is a tensor or read from the input, or "
                              "an index of the features")
        written, at = position
        if at != self.ref.token_at:
            raise self.refuse(f"a selection of token {written} of the module's {shape} input after one of token "
                              f"{self.ref.token_at if self.token is None else self.token}: kgen takes one token, "
                              "the rows its first GEMM reads")
        if self.token is None:
            self.token = written
        return inner

    def _tokens_index_refusal(self) -> str:
        """Why an index of a (batch, tokens, features) input that its rows do not take is refused:
        the one of its tokens' selections kgen takes."""
        return (f"indexing the module's {shape_text(tuple(self.ref.rows_of))} input: kgen takes of a "
                "(batch, tokens, features) input its rows (a Linear over the last dimension), or one token "
                "selected before the first GEMM (x[:, 0], x[:, -1, :], x.select(1, k), k a number), not a "
                "slice of several tokens, a position that is a tensor, or an index of the features")

    def _selected_position(self, fx_node: torch.fx.Node, name: str, args, kwargs) -> tuple | None:
        """(the position as written, its place among the input's tokens) where the op selects one
        token of the (batch, tokens, features) input (Reference.token_position checks it selects
        just that); None for anything else."""
        from kgen.frontend.reference import token_position

        if any(isinstance(v, (_Id, _Marker, _Deferred)) or isinstance(v, torch.fx.Node) for v in _leaves((args[1:], kwargs))):
            return None
        if fx_node.target is operator.getitem or name == "__getitem__":
            func, written = torch.Tensor.__getitem__, [v for v in _leaves(args[1:]) if type(v) is int]
        elif name == "select":
            func = torch.select if fx_node.op == "call_function" else torch.Tensor.select
            index = kwargs.get("index", args[2] if len(args) > 2 else None)
            written = [index] if type(index) is int else []
        else:
            return None
        at = token_position(tuple(self.ref.token_of), func, args[1:], kwargs)
        return None if at is None or len(written) != 1 else (written[0], at)

    def _index(self, x, index):
        """x[...] with full slices, None and Ellipsis only (x[:, None], x[:, :], x[..., 0] of a
        (batch, 1) value): an order-keeping view, taken as Tracer._view takes it. Anything that
        selects elements is refused."""
        mask = self._mask_of(x, index)
        if mask is not None:
            return _Marker("masked", (x, mask))   # y[y < 0]: only an element-wise expression of it,
                                                  # assigned back by the same mask, is taken
        own = self._shape_or_none(x)
        half = self._half_index(x, index)
        if half is not None:
            return half
        leaves: list = []
        torch.fx.node.map_aggregate(index, lambda v: leaves.append(v) or v)
        if any(isinstance(v, _Id) or (isinstance(v, _Marker) and v.kind not in ("batch", "shape")) for v in leaves):
            raise self.refuse("indexing a value by a tensor (y[y > 0], y[:, idx]) selects elements; kgen takes "
                              "indexing that keeps them all (x[:, None], x[:, 0] of a (batch, 1) value, full slices)")
        shapes = []
        for batch in (7919, 7927):   # stand-ins for the batch: the index must keep every element at any batch
            shape = tuple(batch if d == "M" else d for d in own)
            try:
                indexed = torch.empty(shape, device="meta")[index]
            except (IndexError, TypeError, RuntimeError) as e:
                raise self.refuse(f"indexing a value: {e}") from None
            if indexed.numel() != math.prod(shape):
                raise self.refuse("indexing that selects elements of a value (kgen takes indexing that keeps "
                                  "them all: x[:, None], x[:, 0] of a (batch, 1) value, full slices)")
            shapes.append(tuple("M" if d == batch else d for d in indexed.shape))
        if shapes[0] != shapes[1]:
            raise self.refuse("indexing that moves the batch to another place (kgen keeps it first)")
        return self._view(x, "view", (shapes[0],), {})

    def _half_index(self, x, index) -> int | None:
        """h[:, :P], h[..., P:], h[:, P:N] of a (batch, N) value h, P = N / 2: that half (Tracer.half);
        None for any other index."""
        if not isinstance(x, _Id) or not isinstance(index, tuple) or len(index) != 2:
            return None
        lead, cols = index
        if not (lead is Ellipsis or lead == slice(None)) or not isinstance(cols, slice):
            return None
        if any(isinstance(v, (bool, _Id, _Marker)) for v in (cols.start, cols.stop, cols.step)) \
                or cols.step not in (None, 1):
            return None
        start, stop, _ = cols.indices(self.out_features)
        c = self.half_of_range(x, start, stop)
        if c is None:
            return None
        self.sizes_read.append(self.where)   # (half N as a number: the file runs at this N only)
        return self.half(x, c)

    def _sizes(self, name: str, rest, kwargs, key: str = "size") -> tuple:
        """The sizes of x.expand(...) / x.repeat(...) / x.new_zeros(...), given as numbers or as a
        tuple: ints, "M" for the batch (x.size(0), x.shape[0])."""
        sizes = kwargs.get(key, rest[0] if len(rest) == 1 else rest)
        if isinstance(sizes, _Marker) and sizes.kind == "shape":
            sizes = sizes.payload
        if not isinstance(sizes, (tuple, list, torch.Size)):
            sizes = (sizes,)
        out = tuple("M" if d == "M" or (isinstance(d, _Marker) and d.kind == "batch") else d for d in sizes)
        if not all(d == "M" or (isinstance(d, int) and not isinstance(d, (bool, _Id))) for d in out):
            raise self.refuse(f".{name}() with a size kgen cannot read (it takes numbers, x.size(d) and x.shape[d])")
        return out

    def _broadcast(self, x, name: str, rest, kwargs):
        """x.expand(...) / x.expand_as(y) / x.broadcast_to(...) / x.repeat(...) that copies x along
        dimensions of size 1 only (a per-feature bias repeated over the batch): x itself, as an
        operand of a point-wise op whose result has the larger shape anyway (Tracer.pointwise).
        A repeat that tiles the features (x.repeat(1, 2)) is refused."""
        if isinstance(x, _Marker) and x.kind in ("tensor", "matrix"):
            own = x.shape if x.shape is not None else tuple(self._tensor(x.payload).shape)
        else:
            own = self._shape_or_none(x)
            if own is None:
                raise self.refuse(f".{name}() of a value kgen cannot read the shape of")
        if name == "expand_as":
            other = kwargs.get("other", rest[0] if rest else None)
            target = self._shape_or_none(other)
            if target is None and isinstance(other, _Marker) and other.kind in ("tensor", "matrix"):
                target = other.shape if other.shape is not None else tuple(self._tensor(other.payload).shape)
            if target is None:
                raise self.refuse(".expand_as() of a value kgen cannot read the shape of")
        elif name == "repeat":
            counts = self._sizes(name, rest, kwargs, "repeats")
            if len(counts) < len(own):
                raise self.refuse(f".repeat{counts} with fewer counts than the value has dimensions")
            padded = (1,) * (len(counts) - len(own)) + tuple(own)
            if any(c != 1 and d != 1 for c, d in zip(counts, padded)):
                raise self.refuse(f".repeat{tuple('x.size(0)' if c == 'M' else c for c in counts)} of a "
                                  f"{shape_text(own)} value tiles its elements (kgen takes a repeat along "
                                  "dimensions of size 1 only: a broadcast)")
            target = tuple(d if c == 1 else c for c, d in zip(counts, padded))
        else:
            sizes = self._sizes(name, rest, kwargs)
            padded = (None,) * (len(sizes) - len(own)) + tuple(own)
            if len(sizes) < len(own) or any(s == -1 and d is None for s, d in zip(sizes, padded)):
                raise self.refuse(f".{name}{sizes} to fewer dimensions than the value has, or -1 for a new one")
            target = tuple(d if s == -1 else s for s, d in zip(sizes, padded))
        try:
            if broadcast_shapes(tuple(own), target) != target:
                raise ValueError
        except ValueError:
            raise self.refuse(f".{name}() of a {shape_text(own)} value to the shape {shape_text(target)}, "
                              "which is not a broadcast of it") from None
        if target == tuple(own):
            return x
        return _Marker("broadcast", (x, target))

    def _new_tensor(self, x, name: str, rest, kwargs):
        """x.new_zeros(x.shape) / new_ones / new_full(x.size(), v): a constant of x's shape (as
        torch.zeros_like(x)); x.new_tensor(v) and a one-element new_full / new_zeros: a number."""
        if name == "new_tensor":
            data = kwargs.get("data", rest[0] if rest else None)
            extra = {k: v for k, v in kwargs.items() if k != "data"}
            if len(rest) > 1 or extra.keys() - {"requires_grad", "dtype", "device"} or extra.get("requires_grad"):
                raise self.refuse(".new_tensor() with requires_grad, or more than the number, dtype and device")
            why = self._factory_refusal(".new_tensor()", extra.get("dtype"), extra.get("device"), True)
            if why:
                raise self.refuse(why)
            if not _is_number(data):
                raise self.refuse(".new_tensor() of something other than a number")
            return _TensorNumber(_held_as(data, extra.get("dtype")))
        if name == "new_full":
            value = kwargs.get("fill_value", rest[1] if len(rest) > 1 else None)
            rest = rest[:1]
        else:
            value = {"new_zeros": 0.0, "new_ones": 1.0}[name]
        if not _is_number(value):
            raise self.refuse(f".{name}() with the fill value {value!r} (kgen takes a number)")
        if kwargs.keys() - {"size", "fill_value", "dtype", "device"}:
            raise self.refuse(f".{name}() with requires_grad, layout or pin_memory")
        made = {k: v for k, v in kwargs.items() if k in ("dtype", "device")}
        kwargs = {k: v for k, v in kwargs.items() if k not in made}
        sizes = self._sizes(name, rest, kwargs)
        why = self._factory_refusal(f".{name}()", made.get("dtype"), made.get("device"),
                                    math.prod(d for d in sizes if d != "M") == 1 and "M" not in sizes)
        if why:
            raise self.refuse(why)
        if math.prod(d for d in sizes if d != "M") == 1 and "M" not in sizes:
            return _TensorNumber(_held_as(value, made.get("dtype")))
        own = self._shape_or_none(x)
        if isinstance(x, _Id) and sizes == tuple(own):
            return _Marker("filled", (float(value), x))
        raise self.refuse(f".{name}{tuple('x.size(0)' if d == 'M' else d for d in sizes)}: kgen takes a "
                          "constant of the value's own shape or of one element")

    def _output_refusal(self, returned, output) -> str:
        """Why the module's return value is not an output kgen's files give, in its terms: a
        container of tensors, or the GEMM's value as a view of more dims."""
        if isinstance(returned, (tuple, list, dict)):   # (fx's immutable list and dict among them)
            kind = "dict" if isinstance(returned, dict) else "list" if isinstance(returned, list) else "tuple"
            return (f"the module returns a {kind} of {len(returned)} value{'s' * (len(returned) != 1)}; "
                    "kgen's files return one tensor computed from the GEMM (return it alone)")
        if isinstance(output, _Marker) and output.kind == "masked":
            return ("the module returns y[mask], the elements a mask selects (as many as its values make "
                    "true); kgen's files return one tensor of a shape the batch sets (torch.where(mask, y, 0) "
                    "keeps the shape)")
        if isinstance(output, _Marker) and output.kind in ("unsqueezed", "windows"):
            shape = "(batch, 1, features)" if output.kind == "unsqueezed" else "(batch, P, k)"
            return (f"the module returns the GEMM's value as a {shape} view; kgen's files return "
                    "(batch, features), (batch, 1), (batch,) or one number (return the value and "
                    "reshape it where it is used)")
        return "the module returns something other than one tensor computed from the GEMM"

    def _view(self, x, name: str, rest, kwargs):
        """x.view(...) / x.reshape(...) of a value to its own shape (x.view(x.size(0), -1),
        x.view(-1, N), x.reshape(x.shape)): itself; a per-row value between (M, 1) and (M,):
        Tracer._relevel. Any other shape is refused (kgen's values are (batch, features))."""
        sizes = kwargs.get("shape", kwargs.get("size", rest[0] if len(rest) == 1 else rest))   # (view's keyword: size)
        if isinstance(sizes, _Marker) and sizes.kind == "shape":
            sizes = sizes.payload
        if not isinstance(sizes, (tuple, list, torch.Size)):
            sizes = (sizes,)
        if self.leads and any(isinstance(d, _Marker) and d.kind == "lead_size" for d in sizes):
            return self._lead_view(x, tuple(sizes), name)
        target = tuple("M" if d == "M" or (isinstance(d, _Marker) and d.kind == "batch") else d for d in sizes)
        own = self._shape_or_none(x)
        shown = shape_text(tuple("batch" if d == "M" else d for d in own))
        call = f"{name}({', '.join('x.size(0)' if d == 'M' else repr(d) for d in target)})"
        if not all(d == "M" or (isinstance(d, int) and not isinstance(d, (bool, _Id))) for d in target):
            raise self.refuse(f"{call} with a size kgen cannot read (it takes numbers, x.size(d) and x.shape[d])")
        resolved = _resolve_view(own, target)
        if isinstance(x, _Marker) and x.kind == "group" and resolved == ("M", own[1] * own[2]):
            return self._group_back(x)
        if resolved == own:
            return x
        if isinstance(x, _Marker) and x.kind == "unsqueezed" and resolved == own[::2]:
            return x.payload   # (batch, 1, W) back to (batch, W), as squeeze(1)
        if isinstance(x, _Id) and self.level(x) == "tile" and resolved is not None and len(resolved) == 3:
            if resolved == ("M", 1, own[1]):
                return _Marker("unsqueezed", x)   # as x.unsqueeze(1): the input form of 1-d pooling
            if resolved[0] == "M" and resolved[2] > 1 and resolved[1] * resolved[2] == own[1]:
                return _Marker("windows", (x, resolved[2]))   # (batch, P, k): windows a reduction pools
        if resolved is not None and isinstance(x, _Id) and {own, resolved} == {("M", 1), ("M",)}:
            return self._relevel(x, "rowflat" if resolved == ("M",) else "row")
        if isinstance(x, _Id) and self._feeds_the_output_only():
            # (x.view(-1), a 3-d view of the output: torch's own call on the kernel's output, of the
            # shape the reference's value has, so the same at every batch, sizes given as numbers too)
            return self._output_view(x, name, target)
        hint = ("; a size that holds the batch as a number works at that batch only: write x.size(0) or -1"
                if "M" not in target and target[:1] != (-1,) else "")
        raise self.refuse(f"{call} of a {shown} value (kgen keeps values (batch, features): it takes views "
                          f"to the value's own shape, and between (batch, 1) and (batch,)){hint}")

    def _bind(self, signature, args, kwargs):
        # torch's numpy-style aliases (x.sum(axis=1, keepdims=True))
        kwargs = dict(kwargs)
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs and name not in kwargs:
                kwargs[name] = kwargs.pop(alias)
        if "out" in kwargs and kwargs["out"] is None and "out" not in inspect.signature(signature).parameters:
            # out=None is torch's default, no tensor written into: the result returned as without it
            # (torch.mul(x, 2.0, out=None))
            del kwargs["out"]
        try:
            bound = inspect.signature(signature).bind(*args, **kwargs)
        except TypeError as e:
            if "out" in kwargs:
                raise self.refuse("out= (the result written into a tensor given): kgen's values are not written in "
                                  "place that way; assign the result (y = torch.sigmoid(x)) or use the in-place "
                                  "method (x.sigmoid_())") from None
            raise self.refuse(f"arguments not understood: {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def visit_function(self, fn, args, kwargs):
        fn = INPLACE_FUNCTIONS.get(fn, fn)   # Tracer.run rebinds the receiver of an in-place one
        if fn is operator.add and len(args) == 2 and all(isinstance(a, (tuple, list)) for a in args):
            # Sizes joined for a view: HF GPT-2's Conv1D, `x.size()[:-1] + (self.nf,)`.
            return tuple(args[0]) + tuple(args[1])
        if fn is operator.mul and len(args) == 2 and any(isinstance(a, (tuple, list)) for a in args) \
                and any(type(a) is int for a in args):
            # Sizes repeated: timm's drop_path, `(1,) * (x.ndim - 1)`.
            return tuple(args[0]) * args[1] if type(args[1]) is int else args[0] * tuple(args[1])
        if fn is operator.mul and len(args) == 2 and all(isinstance(a, _Marker) and a.kind == "lead_size" for a in args) \
                and not args[0].payload & args[1].payload:
            # B * S of the input's leading sizes: their product, all of them the rows' number (the batch)
            joined = args[0].payload | args[1].payload
            return _Marker("batch", None) if len(joined) == self.leads else _Marker("lead_size", joined)
        if fn is operator.setitem:
            return self.masked_assign(*args)
        if fn is operator.getitem:
            target, index = args
            if isinstance(target, _Marker) and target.kind == "inputs":
                count = 1 + len(self.ref.extra_inputs)
                if isinstance(index, int) and not isinstance(index, (bool, _Id)) and -count <= index < count:
                    index %= count   # x = args[0], (x,) = args; args[1]: the extra input after it
                    return self.input_marker if index == 0 else _Marker("extra_input", (index, False))
                raise self.refuse(f"forward(*args) reading args[{index!r}]: get_inputs() gives {count} "
                                  f"input{'s' if count > 1 else ''}, args[0]{'' if count == 1 else f' to args[{count - 1}]'}")
            if isinstance(target, _Marker) and target.kind == "keywords":
                raise self.refuse(f"Model.forward reads its **kwargs[{index!r}], which the module called with its "
                                  "input alone does not have (kwargs.get(name, default) reads the default)")
            if isinstance(target, _Marker) and target.kind == "extra_args":
                raise self.refuse(f"Model.forward reads its *args[{index!r}] after the input, which the module "
                                  "called with its input alone does not have")
            if isinstance(target, _Marker) and target.kind == "values_indices":
                if index == 0:
                    return target.payload
                if index == 1:   # (x, _ = torch.max(x, 1): refused only where the indices are used)
                    return _Marker("indices", None)
                raise self.refuse("the indices of torch.max / torch.min (argmax) are not supported")
            if isinstance(target, _Marker) and target.kind == "pair" and index in (0, 1):
                return target.payload[index]
            if isinstance(target, _Marker) and target.kind == "halves":
                if isinstance(index, (bool, _Id)) or index not in (0, 1, -1, -2):
                    raise self.refuse(f"the chunk {index!r} of two halves")
                return target.payload[index]
            if isinstance(target, _Marker) and target.kind == "shape" and isinstance(index, slice):
                return tuple(self._size(d) for d in target.payload[index])   # x.shape[-1:], x.shape[1:]
            if isinstance(target, _Marker) and target.kind == "shape":
                if isinstance(index, (bool, _Id)) or not isinstance(index, int) or not -len(target.payload) <= index < len(target.payload):
                    raise self.refuse(f"the size index {index!r} of a {len(target.payload)}-d shape{self.rows_note()}")
                return self._size(target.payload[index])
            if isinstance(target, torch.Size) and isinstance(index, (int, slice)) and not isinstance(index, (bool, _Id)):
                return target[index]   # (a parameter's shape: Tracer._param_shape)
            if isinstance(target, _Marker) and target.kind in ("tensor", "matrix"):
                return self.param_view(target, "__getitem__", (index,), {})
            if self._shape_or_none(target) is not None:
                try:
                    return self._index(target, index)
                except Unsupported:
                    if isinstance(target, _Marker) and target.kind == "input" and self.ref.rows_of is not None \
                            and len(self.ref.rows_of) == 3 and self.ref.feature_dims == 1:
                        raise self.refuse(self._tokens_index_refusal()) from None
                    raise
            raise self.refuse("indexing a tensor is not supported")
        if fn is getattr:
            target, name = args
            if isinstance(target, _Marker) and target.kind == "matrix" and name in ("T", "mT"):
                if target.shape is None:
                    return _Marker("matrix_t", target.payload)
                return self.param_view(target, "t", (), {})
            if isinstance(target, _Marker) and target.kind == "tensor" and name in ("T", "mT"):
                return self.param_view(target, "t" if name == "T" else "mT", (), {})
            if name in ("T", "mT") and self._transpose_of(target) is not None:
                return self._transpose_of(target)
            if isinstance(target, _Marker) and target.kind == "values_indices" and name == "values":
                return target.payload
            if name == "dtype" and self._dtype_of(target) is not None:
                # (a marker, not the dtype: x.to(x.dtype) follows the module's dtype, where
                # x.to(torch.float32) names one: Tracer._fp32_cast)
                return _Marker("dtype_of", self._dtype_of(target))
            if name == "data":
                # y.data / self.p.data: the tensor without its autograd history, sharing its
                # storage, as .detach() (an alias for in-place ops: Tracer._aliasing)
                return self.visit_method("detach", (target,), {})
            if name == "device" and self._dtype_of(target) is not None:
                return _Marker("device", None)   # (taken by .to() only: the value's own device)
            if name == "shape" and self._known_shape(target) is not None:
                return _Marker("shape", self._known_shape(target))
            if name == "ndim" and self._known_shape(target) is not None:
                return len(self._known_shape(target))   # (timm's drop_path: (1,) * (x.ndim - 1))
            if name in ("shape", "ndim") and isinstance(target, _Marker) and target.kind in ("tensor", "matrix"):
                shape = self._param_shape(target)   # (a parameter's sizes are the module's numbers)
                return shape if name == "shape" else len(shape)
            raise self.refuse(f"the attribute .{name} is not supported")
        if fn in (torch.flatten, torch.squeeze, torch.unsqueeze, torch.clone, torch.detach) or \
                (fn in (torch.t, torch.transpose, torch.permute) and args and self._transpose_of(args[0]) is not None):
            return self.visit_method(fn.__name__, args, kwargs)
        if fn is torch.reshape:
            return self.visit_method("reshape", args, kwargs)
        if fn in (F.prelu, torch.prelu):
            x = args[0] if args else kwargs["input"]
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            return self.prelu(x, weight)
        if fn is torch.einsum:
            return self.einsum(args, kwargs)
        if fn is torch.tensordot:
            return self.tensordot(args, kwargs)
        if fn not in MATMUL_FUNCTIONS and fn not in (F.linear, torch.addmm):
            for a in args:
                self._check_input(a)
        if fn is F.linear:
            a = self._bind(_linear, args, kwargs)
            w, b = a["weight"], a["bias"]
            if isinstance(w, _Marker) and w.kind == "weight_expr":
                if b is not None and not (isinstance(b, _Marker) and b.kind in ("tensor", "matrix")):
                    raise self.refuse("F.linear with a bias that is not a parameter of the module")
                z = self.gemm(a["input"], self._weight_expression(w.payload[0], False), None)
                return z if b is None else self.linear_bias(z, b)
            transposed = isinstance(w, _Marker) and w.kind == "matrix_t"   # F.linear(x, W.t()): x @ W
            if not (isinstance(w, _Marker) and w.kind == "matrix" and w.shape is None) and not transposed:
                raise self.refuse("F.linear with a weight that is not a parameter of the module")
            if b is not None and not (isinstance(b, _Marker) and b.kind in ("tensor", "matrix")):
                raise self.refuse("F.linear with a bias that is not a parameter of the module")
            # A bias parameter of the weight's out_features, as nn.Linear's: the GEMM's own (so that
            # F.linear's of Linears side by side are concatenated as theirs: Tracer.side_by_side_gemm)
            out_features = self._tensor(w.payload).shape[0 if not transposed else 1] if b is not None else None
            bias_path = b.payload if b is not None and b.shape is None and \
                tuple(self._tensor(b.payload).shape) == (out_features,) else None
            z = self.gemm(a["input"], w.payload, bias_path, stored_kn=transposed)
            return z if b is None or bias_path is not None else self.linear_bias(z, b)
        if fn is torch.addmm:
            # addmm(b, x, W.t(), beta=β, alpha=α) = β b + α x Wᵀ: the GEMM, then the scalings and
            # the bias (as F.linear's IR where both are 1).
            a = self._bind(_addmm, args, kwargs)
            beta, alpha = a["beta"], a["alpha"]
            if not (_is_number(beta) and _is_number(alpha)) or isinstance(beta, _TensorNumber) \
                    or isinstance(alpha, _TensorNumber):
                raise self.refuse(f"torch.addmm with beta={beta!r}, alpha={alpha!r} (kgen takes numbers)")
            b = a["input"]
            if not (isinstance(b, _Marker) and b.kind in ("tensor", "matrix")):
                raise self.refuse("torch.addmm whose first operand is not a parameter of the module")
            z = self.visit_function(torch.mm, (a["mat1"], a["mat2"]), {})
            if beta == 0:
                raise self.refuse("torch.addmm with beta=0 (torch ignores its first operand, whose "
                                  "gradient is then 0: write the product alone, torch.mm(x, W.t()))")
            if alpha != 1:
                z = self.pointwise("mul", [z, float(alpha)])
            if beta != 1:
                # (beta * b in torch's math type, float32 for a 16-bit b, unrounded: cuBLAS's
                # epilogue computes alpha * acc + beta * b in fp32 and rounds once, as at::cuda::blas
                # gemm passes beta as opmath_t; rounded first, y = addmm(b, x, W.t(), beta=0.3)
                # was a step off)
                b = self.pointwise("mul", [self._internal_upcast(b)[0], float(beta)])
            return self.linear_bias(z, b)
        if fn in MATMUL_FUNCTIONS:
            x, w = args
            if isinstance(w, _Marker) and w.kind == "transposed":
                # W @ x.T is the GEMM's transpose, (x Wᵀ)ᵀ: taken where it is transposed back
                # ((W @ x.T).T is x @ W.T), W stored (N, K), or (K, N) as W.t() @ x.T
                if isinstance(x, _Marker) and x.kind == "matrix" and x.shape is None:
                    return _Marker("transposed", self.gemm(w.payload, x.payload, None))
                if isinstance(x, _Marker) and x.kind == "matrix_t":
                    return _Marker("transposed", self.gemm(w.payload, x.payload, None, stored_kn=True))
                raise self.refuse(TRANSPOSED_ACTIVATION)
            if isinstance(x, _Marker) and x.kind == "transposed":
                raise self.refuse(TRANSPOSED_ACTIVATION)
            if isinstance(w, _Marker) and w.kind == "weight_expr":
                # x @ w of a computed w, (K, N): the GEMM of its transpose
                return self.gemm(x, self._weight_expression(w.payload[0], True), None)
            if isinstance(w, _Marker) and w.kind == "matrix" and w.shape is None:
                # x @ W with W stored (K, N): the GEMM x (Wᵀ)ᵀ; the emitted forward hands the
                # kernels Wᵀ made contiguous (one transpose of W per call).
                return self.gemm(x, w.payload, None, stored_kn=True)
            if not (isinstance(w, _Marker) and w.kind == "matrix_t"):
                raise self.refuse("a matmul whose right operand is not a parameter W of the module "
                                  "(stored (K, N): x @ W) or its transpose (stored (N, K): x @ W.t())")
            return self.gemm(x, w.payload, None)
        if fn in PYTHON_ARITHMETIC and not kwargs and all(_is_number(a) and not isinstance(a, _TensorNumber)
                                                          for a in args):
            # c // k, c * 2, ... of Python numbers (sizes, constants): Python's own result, an int
            # where Python gives one (a view's size: x.view(n, c // k, k))
            return fn(*args)
        if fn in NUMBER_FUNCTIONS and not kwargs and all(_is_number(a) for a in args):
            # math.sqrt(x.size(-1)) and its kin: a Python number of numbers (x.size(d) of a
            # feature dimension is one), computed here as the reference computes it
            return fn(*args)
        if fn in (abs, operator.abs, operator.pos) and len(args) == 1 and not kwargs:
            # abs(x) and +x of a tensor (Python's builtins call its __abs__ / __pos__): torch.abs,
            # and x itself
            self._check_input(args[0])
            return self.value(args[0]) if fn is operator.pos else self.pointwise("abs", [args[0]])
        if fn in LOGICAL_FUNCTIONS:
            return self.logical(LOGICAL_FUNCTIONS[fn], args)
        if fn in COMPARISON_FUNCTIONS:
            a = self._bind(_compare, args, kwargs)
            return _Marker("comparison", (COMPARISON_FUNCTIONS[fn], a["input"], a["other"]))
        if fn in FLOAT_CLASS_FUNCTIONS:
            return self.float_class(FLOAT_CLASS_FUNCTIONS[fn], *args, **kwargs)
        if fn is torch.where:
            return self.where_op(args, kwargs)
        if fn in FILL_FUNCTIONS:
            return self.fill_like(fn, args, kwargs)
        if fn in LERP_FUNCTIONS:
            return self.lerp(**self._bind(_lerp, args, kwargs))
        if fn is torch.nan_to_num:
            return self.nan_to_num(**self._bind(_nan_to_num, args, kwargs))
        if fn in EXTREMUM_FUNCTIONS:
            return self.tensor_pair(EXTREMUM_FUNCTIONS[fn], args, kwargs)
        if fn in TENSOR_PAIR_FUNCTIONS:
            return self.tensor_pair(TENSOR_PAIR_FUNCTIONS[fn], args, kwargs)
        if fn in (torch.div, torch.divide) and "rounding_mode" in kwargs:
            # true division (None), torch's trunc(x / y) ('trunc'), or its floor_divide ('floor',
            # by a number: not floor(x / y) in torch, which rounds the fmod-based quotient).
            a = self._bind(_div, args, kwargs)
            if a["rounding_mode"] is None:
                return self.pointwise("div", [a["input"], a["other"]])
            if a["rounding_mode"] == "trunc":
                # By a number, torch's CUDA kernel truncates the quotient in float32 (x * (1 / c),
                # its math type) and rounds once: rounded to a 16-bit dtype before the trunc, 4.99
                # was 5 in bf16, a jump of 1 on a few % of the elements (Tracer._internal_upcast).
                # By a tensor it truncates the quotient of two 16-bit values, rounded (c10's Half
                # and BFloat16 operator/), as the two ops of the IR compute it.
                if _is_number(a["other"]) and not _is_number(a["input"]):
                    dividend, upcast = self._internal_upcast(a["input"])
                    quotient = self.pointwise("div", [dividend, a["other"]])
                    return self._internal_cast_back(self.pointwise("trunc", [quotient]), upcast)
                return self.pointwise("trunc", [self.pointwise("div", [a["input"], a["other"]])])
            if a["rounding_mode"] == "floor":   # torch.floor_divide
                return self.by_number("floor_divide", a["input"], a["other"])
            raise self.refuse(f"{fn.__name__} with rounding_mode={a['rounding_mode']!r}")
        if fn is torch.round:
            a = self._bind(_round, args, kwargs)
            return self.pointwise("round", [a["input"]], {"decimals": a["decimals"]})
        if fn in BY_NUMBER_FUNCTIONS:
            a = self._bind(lambda input, other: None, args, kwargs)
            if BY_NUMBER_FUNCTIONS[fn] == "floor_divide" and self._records_gradient(a["input"]):
                # (torch has no derivative for it: a backward through it raises, in torch too;
                # `y * (self.c // 2)` of a buffer records nothing, and trains)
                self.no_derivative.append(self.where)
            return self.by_number(BY_NUMBER_FUNCTIONS[fn], a["input"], a["other"])
        if fn in (torch.ones, torch.zeros, torch.full):
            return self.factory(fn, args, dict(kwargs))
        if fn in (torch.tensor, torch.as_tensor, torch.scalar_tensor):
            # torch.tensor(0.0, device=x.device, dtype=x.dtype) in forward (fx records the call,
            # its device being a traced value's): the number, as torch.tensor(0.0) is
            a = self._bind(lambda data, *, dtype=None, device=None, requires_grad=False, pin_memory=False: None,
                           args, kwargs)
            dtype = a["dtype"].payload if isinstance(a["dtype"], _Marker) and a["dtype"].kind == "dtype_of" else a["dtype"]
            if not _is_number(a["data"]) or a["requires_grad"]:
                raise self.refuse(f"torch.{fn.__name__} of something other than a number (kgen takes a "
                                  "one-element tensor made in forward as the number it holds)")
            # (a 0-dim tensor of any float dtype takes part in type promotion as a number does)
            if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
                raise self.refuse(f"torch.{fn.__name__}(..., dtype={dtype}) (kgen's values are floats)")
            return _TensorNumber(float(a["data"]))
        if fn is torch.pairwise_distance:
            # ATen's pairwise_distance: norm(x1 - x2 + eps, p) over the last dimension
            a = self._bind(lambda x1, x2, p=2.0, eps=1e-6, keepdim=False: None, args, kwargs)
            if not (_is_number(a["p"]) and _is_number(a["eps"])):
                raise self.refuse(f"torch.pairwise_distance with p={a['p']!r}, eps={a['eps']!r} (kgen takes numbers)")
            difference = self.pointwise("add", [self.pointwise("sub", [a["x1"], a["x2"]]), float(a["eps"])])
            return self.norm(difference, a["p"], -1, a["keepdim"])
        if fn is torch.cosine_similarity:
            # (ATen divides each operand by its own 2-norm clamped below by eps, with autograd rules
            # of its own around the clamp, which kgen has not reproduced and checked)
            raise self.refuse("torch.cosine_similarity (F.cosine_similarity) is not taken; kgen takes the norms of "
                              "the GEMM's rows (y.norm(dim=-1), F.normalize(y, dim=-1)), their products and sums, "
                              "and F.pairwise_distance")
        if fn is torch.broadcast_to:
            a = self._bind(lambda input, size: None, args, kwargs)
            return self._broadcast(a["input"], "broadcast_to", (a["size"],), {})
        if fn in BINARY_FUNCTIONS:
            a = self._bind(_binary, args, kwargs)
            op, other = BINARY_FUNCTIONS[fn], a["other"]
            if a["alpha"] != 1:
                # torch.add(x, y, alpha=a) is x + a * y (torch.sub: x - a * y), in float32 for
                # 16-bit operands and rounded once (Tracer._opmath_kernel)
                if op not in ("add", "sub") or not _is_number(a["alpha"]):
                    raise self.refuse(f"{op} with alpha={a['alpha']!r}")
                (other,), cast_back = self._opmath_kernel([other], [a["input"]])
                other = self.pointwise("mul", [other, a["alpha"]])
                return self._internal_cast_back(self.pointwise(op, [a["input"], other]), cast_back)
            return self.pointwise(op, [a["input"], other])
        if fn in COMPOSITE_FUNCTIONS:
            sig, name = COMPOSITE_FUNCTIONS[fn]
            a = self._bind(sig, args, kwargs)
            a.pop("inplace", None)
            return self.composite(name, **a)
        if fn in STATISTIC_FUNCTIONS:
            sig, what = STATISTIC_FUNCTIONS[fn]
            a = self._bind(sig, args, kwargs)
            if a.get("out") is not None:
                raise self.refuse(f"{what} with out")
            if a.get("dtype") is not None:
                # (norm(y, dtype=torch.float32): the norm of y cast to float32, computed and returned
                # in float32, as torch's linalg_vector_norm casts its input to dtype first; the
                # module's own dtype changes nothing)
                self._output_dtype(a, what)
            if what == "norm":
                p = a["p"] if "p" in a else (2 if a["ord"] is None else a["ord"])
                return self.norm(a["input"], p, a["dim"], a["keepdim"])
            if a["unbiased"] is not None and a["correction"] is not None:
                raise self.refuse(f"{what} with both unbiased and correction")
            correction = a["correction"] if a["correction"] is not None else 1 if a["unbiased"] in (None, True) else 0
            return self.variance(what, a["input"], a["dim"], correction, a["keepdim"])
        if fn in (torch.addcmul, torch.addcdiv):
            # ATen: input + value * tensor1 * tensor2 (addcdiv: value * (tensor1 / tensor2))
            a = self._bind(lambda input, tensor1, tensor2, *, value=1: None, args, kwargs)
            if not _is_number(a["value"]):
                raise self.refuse(f"{fn.__name__} with value={a['value']!r}")
            # (in float32 for 16-bit operands, rounded once: Tracer._opmath_kernel)
            (t1, t2), cast_back = self._opmath_kernel([a["tensor1"], a["tensor2"]], [a["input"]])
            term = self.pointwise("mul" if fn is torch.addcmul else "div", [t1, t2])
            if a["value"] != 1:
                term = self.pointwise("mul", [a["value"], term])
            return self._internal_cast_back(self.pointwise("add", [a["input"], term]), cast_back)
        if fn is F.batch_norm:
            return self.functional_batch_norm(self._bind(_batch_norm, args, kwargs))
        if fn is F.softmin:
            a = self._softmax_args(args, kwargs)
            return self.reduce("softmax", self.pointwise("neg", [a["input"]]), a["dim"], True)
        if fn is torch.square:   # (bound: torch.square(x, out=y) wrote y, which was read unwritten)
            return self.visit_function(torch.pow, (self._bind(_unary, args, kwargs)["input"], 2), {})
        if fn is torch.rsub:   # torch.rsub(x, y, alpha=a): y - a * x
            a = self._bind(_binary, args, kwargs)
            return self.visit_function(torch.sub, (a["other"], a["input"]), {"alpha": a["alpha"]})
        if fn in POW_FUNCTIONS:
            a = self._bind(_pow, args, kwargs)
            base, exponent = a["input"], a["exponent"]
            if _is_number(base) and not _is_number(exponent):
                # base ** x: ATen's pow(Scalar, Tensor) is powf(base, x)
                if not base > 0:
                    raise self.refuse(f"pow with the base {base!r} and a tensor exponent (kgen takes a "
                                      "positive constant base)")
                return self.pointwise("rpow", [exponent], {"base": float(base)})
            if not _is_number(exponent):
                return self.pointwise("pow_tensor", [base, exponent])   # x ** self.p, x.pow(x)
            return self.pointwise("pow", [base], {"exponent": float(exponent)})
        if fn in POINTWISE_FUNCTIONS:
            sig, name, attr_map = POINTWISE_FUNCTIONS[fn]
            a = self._bind(sig, args, kwargs)
            bounds = {k: a[k] for k in ("min", "max") if k in a and isinstance(a[k], (_Id, _Marker))}
            if name == "clamp" and bounds:
                # torch.clamp with tensor bounds: min(max(x, lo), hi), as ATen's clamp kernel
                # (NaN from x or a bound propagates; at an exact tie the gradient is shared, where
                # clamp's goes to x: a set of measure zero)
                x = a["input"]
                for key, op, const in (("min", "maximum", "maximum_const"), ("max", "minimum", "minimum_const")):
                    if a.get(key) is not None:
                        x = self.pointwise(op, [x, a[key]]) if key in bounds else \
                            self.pointwise(const, [x], {"other": a[key]})
                return x
            return self.pointwise(name, [a["input"]], {k: a[v] for k, v in attr_map.items()})
        if fn is F.relu6:
            return self.pointwise("hardtanh", [self._bind(_act, args, kwargs)["input"]], {"min_val": 0.0, "max_val": 6.0})
        if fn in REDUCE_FUNCTIONS:
            a = self._bind(_reduce, args, kwargs)
            self._output_dtype(a, REDUCE_FUNCTIONS[fn])
            return self.reduce(REDUCE_FUNCTIONS[fn], a["input"], a["dim"], a["keepdim"])
        if fn in (torch.max, torch.min):
            return self._max_min("max" if fn is torch.max else "min", args, kwargs)
        if fn in SOFTMAX_FUNCTIONS:
            a = self._softmax_args(args, kwargs)
            return self.reduce(SOFTMAX_FUNCTIONS[fn], a["input"], a["dim"], True)
        if fn in (F.layer_norm, torch.layer_norm):
            a = self._bind(_layer_norm if fn is F.layer_norm else _torch_layer_norm, args, kwargs)
            paths, upcast = self._affine_paths("F.layer_norm", a)
            shape = a["normalized_shape"]
            return self.layer_norm(a["input"], tuple(shape) if isinstance(shape, (tuple, list)) else (shape,),
                                   *paths, a["eps"], affine_fp32=upcast)
        if fn in (F.rms_norm, torch.rms_norm):
            a = self._bind(lambda input, normalized_shape, weight=None, eps=None: None, args, kwargs)
            w = a["weight"]
            if w is not None and not (isinstance(w, _Marker) and w.kind == "tensor"):
                raise self.refuse("F.rms_norm with a weight that is not a parameter of the module")
            shape = a["normalized_shape"]
            return self.rms_norm(a["input"], tuple(shape) if isinstance(shape, (tuple, list)) else (shape,),
                                 None if w is None else w.payload, a["eps"])
        if fn is F.normalize:
            a = self._bind(_normalize, args, kwargs)
            if a["out"] is not None:   # (torch writes the result into it: ignored, a later read of it was wrong)
                raise self.refuse("F.normalize with out= (the result written into a tensor given): assign the "
                                  "result instead (y = F.normalize(x))")
            return self.normalize(a["input"], a["p"], a["dim"], a["eps"])
        if fn in (F.group_norm, torch.group_norm):
            a = self._bind(_group_norm if fn is F.group_norm else _torch_group_norm, args, kwargs)
            paths, upcast = self._affine_paths("F.group_norm", a)
            return self.group_norm(a["input"], a["num_groups"], *paths, a["eps"], None, affine_fp32=upcast)
        if fn is torch.chunk:
            a = self._bind(_chunk, args, kwargs)
            return self.chunk(a["input"], a["chunks"], a["dim"])
        if fn is torch.split:
            a = self._bind(_split, args, kwargs)
            return self.split(a["tensor"], a["split_size_or_sections"], a["dim"])
        if fn is F.glu:
            a = self._bind(_glu, args, kwargs)
            return self.glu(a["input"], a["dim"])
        if fn is torch.narrow:
            return self.visit_method("narrow", args, kwargs)
        if fn in ADAPTIVE_POOL_FUNCTIONS:
            a = self._bind(_adaptive_pool1d, args, kwargs)
            return self.adaptive_pool(ADAPTIVE_POOL_FUNCTIONS[fn], a["input"], a["output_size"], a["return_indices"])
        if fn in POOL_FUNCTIONS:
            sig, op = POOL_FUNCTIONS[fn]
            a = self._bind(sig, args, kwargs)
            return self.pool(op, a["input"], a["kernel_size"], a["stride"], a["padding"],
                             a["ceil_mode"], a.get("dilation", 1), a.get("return_indices", False))
        if fn is F.dropout:
            a = self._bind(_dropout, args, kwargs)
            return self.dropout(a["input"], a["p"], a["training"], "")
        if fn in (F.rrelu, torch.rrelu):
            a = self._bind(_rrelu, args, kwargs)
            return self.rrelu(a["input"], a["lower"], a["upper"], a["training"], "")
        if fn in (F.alpha_dropout, F.feature_alpha_dropout):
            a = self._bind(_alpha_dropout, args, kwargs)
            if a["inplace"]:
                raise self.refuse(f"{_public_name(fn)} with inplace=True; write it out of place")
            return self.alpha_dropout(a["input"], a["p"], a["training"], "", fn is F.feature_alpha_dropout)
        if fn in (F.instance_norm, torch.instance_norm):
            return self.instance_norm(self._bind(_instance_norm, args, kwargs), _public_name(fn))
        if fn is torch.dropout:   # (what F.dropout calls: the same mask from the same draws)
            a = self._bind(_torch_dropout, args, kwargs)
            return self.dropout(a["input"], a["p"], a["train"], "")
        if fn in RANDOM_FUNCTIONS:
            raise self.refuse(f"the function {_public_name(fn)} {RANDOM_FUNCTIONS[fn]}")
        raise self.refuse(f"the function {_public_name(fn)} is not supported")

    def _affine_paths(self, fn: str, a: dict) -> tuple[list, bool]:
        """The paths of a functional norm's weight and bias (None where absent), each a parameter of
        the module, and whether they were given upcast (self.weight.float())."""
        paths, upcast = [], False
        for key in ("weight", "bias"):
            v = a[key]
            if isinstance(v, _Id) and self.nodes[v].op == "to_float32" and self.nodes[self.nodes[v].args[0]].kind == "param":
                # (self.weight.float(): the parameter in float32, as torch's norm reads it then:
                # the node's affine_fp32, Tracer.group_norm)
                upcast = True
                v = _Marker("tensor", self.nodes[self.nodes[v].args[0]].attrs["path"])
            if v is not None and not (isinstance(v, _Marker) and v.kind == "tensor"):
                raise self.refuse(f"{fn} with a {key} that is not a parameter of the module")
            paths.append(v.payload if v is not None else None)
        return paths, upcast

    def _max_min(self, kind: str, args, kwargs):
        # torch's keyword and numpy-style spellings, as _bind reads them for the other reductions
        # (torch.max(input=x, dim=1) raised an IndexError; axis=1 was read as dim=None)
        kwargs = dict(kwargs)
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs and name not in kwargs:
                kwargs[name] = kwargs.pop(alias)
        if not args and "input" in kwargs:
            args = (kwargs.pop("input"),)
        second = args[1] if len(args) >= 2 else kwargs.get("other")
        if isinstance(second, (_Id, _Marker, _TensorNumber)) or "other" in kwargs:
            # torch.min(x, other) / torch.max(x, other) of two tensors: torch.minimum / maximum.
            return self.tensor_pair({"min": "minimum", "max": "maximum"}[kind], args, kwargs)
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
        if dim is None:
            # x.max() of everything: one value, no indices (as torch.amax)
            return self.reduce(kind, args[0], None, False)
        return _Marker("values_indices", self.reduce(kind, args[0], dim, keepdim))

    def einsum(self, args, kwargs):
        """torch.einsum of the forms kgen's ops are (einsum_form): 'bk,nk->bn' (x Wᵀ, W stored
        (N, K): the GEMM, as x @ W.t()), 'bk,kn->bn' (W stored (K, N)) and 'bn,n->bn' (a
        per-feature product). Others are refused."""
        operands = args[1:] if len(args) > 2 or not isinstance(args[1:][0], (list, tuple)) else tuple(args[1])
        equation = args[0] if args and isinstance(args[0], str) else ""
        other_form = self.refuse(f"torch.einsum({args[0]!r}, ...) (kgen takes 'bk,nk->bn', the GEMM x Wᵀ, "
                                 "'bk,kn->bn' of a W stored (K, N), and 'bn,n->bn', the batch also as '...'; "
                                 "or write the GEMM as nn.Linear, F.linear or x @ W.t())")
        form = einsum_form(equation)
        if kwargs or form is None or len(operands) != 2:
            raise other_form
        x, w = operands
        if form == "gemm_nk":
            if isinstance(w, _Marker) and w.kind == "weight_expr":
                return self.gemm(x, self._weight_expression(w.payload[0], False), None)
            if not (isinstance(w, _Marker) and w.kind == "matrix" and w.shape is None):
                raise self.refuse(f"torch.einsum({args[0]!r}, ...) whose second operand is not a parameter of the module")
            return self.visit_function(torch.matmul, (x, _Marker("matrix_t", w.payload)), {})
        if form == "mul":
            return self.pointwise("mul", [x, w])
        return self.visit_function(torch.matmul, (x, w), {})   # "gemm_kn": W stored (K, N)

    def tensordot(self, args, kwargs):
        """torch.tensordot(x, W, dims) contracting x's features with one dimension of a matrix:
        dims=1 or ([1], [0]) is x @ W (W stored (K, N)), ([1], [1]) is x Wᵀ; the einsum of
        that form (x's features as -1 or 1, W's dimension as 0 / -2 or 1 / -1)."""
        a = self._bind(lambda a, b, dims=2, out=None: None, args, kwargs)
        dims, said = a["dims"], f"torch.tensordot(..., dims={a['dims']!r})"
        if a["out"] is not None:
            raise self.refuse("torch.tensordot with out=")
        if type(dims) is int:
            pair = ((-1,), (0,)) if dims == 1 else None
        elif isinstance(dims, (tuple, list)) and len(dims) == 2:
            pair = tuple(tuple(d) if isinstance(d, (tuple, list)) else (d,) for d in dims)
        else:
            pair = None
        if pair is None or not all(len(d) == 1 and type(d[0]) is int for d in pair) or pair[0][0] not in (1, -1) \
                or pair[1][0] not in (0, 1, -1, -2):
            raise self.refuse(f"{said} (kgen takes the contraction of x's features with one dimension "
                              "of a weight matrix: dims=1, ([1], [0]) or ([1], [1]))")
        equation = "bk,kn->bn" if pair[1][0] in (0, -2) else "bk,nk->bn"
        return self.einsum((equation, a["a"], a["b"]), {})

    def batchnorm(self, x, path: str, module: nn.BatchNorm1d, counts: bool = True) -> int:
        """BatchNorm1d `path` of x; `counts`: whether the forward adds one to its
        num_batches_tracked (the module does; F.batch_norm on its buffers does not)."""
        if self.lead_rank:
            raise self.refuse(f"BatchNorm1d of a value of {self.lead_rank} dimensions, the input's leading sizes first "
                              "(torch's channels are then its dimension 1, not the features; kgen takes "
                              "h.transpose(1, 2), the features as the channels, transposed back after)")
        x = self.value(x)
        if self.level(x) != "tile" and not self._tile_input(x):
            raise self.refuse(f"BatchNorm1d of {self._not_batch_features(x)}")
        if module.num_features != self.out_features:
            raise self.refuse(f"BatchNorm1d({module.num_features}) after a GEMM of {self.out_features} features")
        for n in self.nodes:
            if n.kind == "reduce" and self._depends(x, n.id):
                raise self.refuse("BatchNorm1d after a row reduction is not supported yet")
        self._refuse_16_bit_parameters_on_fp32(
            x, "BatchNorm1d", [t for t in (module.weight, module.running_mean) if isinstance(t, torch.Tensor)])
        return self.add("batchnorm", "tile", [x], module=path, **({} if counts else {"counts": False}))

    def _refuse_16_bit_parameters_on_fp32(self, x, what: str, tensors: list) -> None:
        """A norm of a value eager holds in float32 (after an upcast, Node.fp32) whose parameters or
        buffers (`tensors`) are 16-bit: torch's kernels refuse the mixed dtypes (a float32 input
        with bf16 weights), which the meta device does not check."""
        if isinstance(x, _Id) and self.nodes[x].fp32 and any(t.dtype != torch.float32 for t in tensors):
            raise self.refuse(f"{what} of a value in float32 (after the forward's upcast) with its parameters in "
                              f"{self.ref.input.dtype}: torch refuses the mixed dtypes; apply it before the upcast "
                              "or after the cast back")

    def functional_batch_norm(self, a: dict) -> int:
        """F.batch_norm on one BatchNorm1d's own running buffers, weight and bias, with its
        momentum and eps and training=self.training: that module's normalization, except that
        F.batch_norm leaves num_batches_tracked alone (the node's counts=False). Buffers of the
        model's own, or another momentum, eps or mode, are refused."""
        paths = {k: a[k].payload if isinstance(a[k], _Marker) and a[k].kind == "tensor" else a[k]
                 for k in ("running_mean", "running_var", "weight", "bias")}
        owner = paths["running_mean"].rpartition(".")[0] if isinstance(paths["running_mean"], str) else ""
        module = self.model.get_submodule(owner) if owner else None
        if not isinstance(module, nn.BatchNorm1d) or any(
                paths[k] != (f"{owner}.{k}" if getattr(module, k) is not None else None) for k in paths):
            raise self.refuse("F.batch_norm on buffers and parameters that are not one nn.BatchNorm1d's own "
                              "running_mean, running_var, weight and bias (kgen takes F.batch_norm(x, "
                              "self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias, "
                              "self.training, self.bn.momentum, self.bn.eps), or the module)")
        differs = [k for k, want in (("training", module.training), ("momentum", module.momentum), ("eps", module.eps))
                   if a[k] != want]
        if differs:
            raise self.refuse(f"F.batch_norm with a {' and '.join(differs)} other than self.{owner}'s own "
                              "(training=self.training, its momentum and eps)")
        return self.batchnorm(a["input"], owner, module, counts=False)

    def nan_to_num(self, input, nan=0.0, posinf=None, neginf=None):
        """torch.nan_to_num: NaN to `nan`, +-inf to posinf / neginf (by default the dtype's
        largest finite values), as three `where`s, so that the gradient is torch's, g where x is
        finite and 0 elsewhere. The defaults are float32's: a file whose reference takes them runs
        fp32 modules only (Graph.fp32_casts), since a 16-bit module's are its own dtype's."""
        for key, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
            if v is not None and not _is_number(v):
                raise self.refuse(f"nan_to_num with {key}={v!r} (kgen takes a number)")
        if posinf is None or neginf is None:
            self.fp32_casts.append((*self.where, "its nan_to_num replaces an infinity with the largest finite "
                                    "value of the module's dtype, float32's in kgen's kernels"))
        big = float(torch.finfo(torch.float32).max)
        x = input
        finite = self.pointwise("where", [x, math.inf, big if posinf is None else float(posinf), x], {"compare": "eq"})
        finite = self.pointwise("where", [x, -math.inf, -big if neginf is None else float(neginf), finite],
                                {"compare": "eq"})
        return self.pointwise("where", [x, x, float(nan), finite], {"compare": "ne"})

    def lerp(self, input, end, weight):
        """torch.lerp in torch's formula (ATen/native/Lerp.h): start + weight (end - start) where
        |weight| < 0.5, else end - (end - start)(1 - weight); a number weight picks its side
        here, a value weight per element."""
        diff = self.pointwise("sub", [end, input])
        if isinstance(weight, bool):
            raise self.refuse(f"lerp with weight={weight!r}")
        if _is_number(weight):
            if abs(weight) < 0.5:
                return self.pointwise("add", [input, self.pointwise("mul", [diff, weight])])
            return self.pointwise("sub", [end, self.pointwise("mul", [diff, 1.0 - weight])])
        small = self.pointwise("add", [input, self.pointwise("mul", [weight, diff])])
        large = self.pointwise("sub", [end, self.pointwise("mul", [diff, self.pointwise("sub", [1.0, weight])])])
        return self.pointwise("where", [self.pointwise("abs", [weight]), 0.5, small, large], {"compare": "lt"})

    def composite(self, name: str, input, **a):
        """An activation torch defines from others, written out with kgen's ops in torch's own
        formula (its Python definition, or its kernel's expression), so that the result, NaN
        and infinities included, and the gradient are torch's."""
        x = input
        for key, v in a.items():
            if not _is_number(v):
                raise self.refuse(f"{name} with {key}={v!r} (kgen takes a number)")
        if name == "logsigmoid":     # log(sigmoid(x)) = -softplus(-x)
            softplus = self.pointwise("softplus", [self.pointwise("neg", [x])], {"beta": 1.0, "threshold": 20.0})
            return self.pointwise("neg", [softplus])
        if name == "softsign":       # F.softsign: x / (x.abs() + 1)
            return self.pointwise("div", [x, self.pointwise("add", [self.pointwise("abs", [x]), 1.0])])
        if name == "tanhshrink":     # F.tanhshrink: x - x.tanh()
            return self.pointwise("sub", [x, self.pointwise("tanh", [x])])
        if name == "reciprocal":     # torch's kernel: 1 / x
            return self.pointwise("div", [1.0, x])
        if name == "sign":           # c10::signum: (0 < x) - (x < 0), so 0 for 0 and NaN; no gradient
            negative = self.pointwise("where", [x, 0.0, -1.0, 0.0], {"compare": "lt"})
            return self.pointwise("where", [x, 0.0, 1.0, negative], {"compare": "gt"})
        if name == "threshold":      # ATen: x <= threshold ? value : x (a NaN stays)
            return self.pointwise("where", [x, a["threshold"], a["value"], x], {"compare": "le"})
        if name == "hardshrink":     # ATen: -lambd <= x <= lambd ? 0 : x (a NaN stays)
            return self.pointwise("where", [self.pointwise("abs", [x]), a["lambd"], 0.0, x], {"compare": "le"})
        if name == "softshrink":     # ATen: x > lambd ? x - lambd : x < -lambd ? x + lambd : 0 (NaN stays)
            lambd = a["lambd"]
            above, under = self.pointwise("sub", [x, lambd]), self.pointwise("add", [x, lambd])
            below = self.pointwise("where", [x, -lambd, under, self.pointwise("mul", [x, 0.0])], {"compare": "lt"})
            return self.pointwise("where", [x, lambd, above, below], {"compare": "gt"})
        if name == "celu":           # ATen: elu with input scale 1 / alpha: x > 0 ? x : alpha * expm1(x / alpha)
            alpha = a["alpha"]
            if alpha == 0:
                raise self.refuse("celu with alpha=0 (torch refuses it too)")
            scaled = self.pointwise("elu", [self.pointwise("mul", [x, 1.0 / alpha])], {"alpha": alpha})
            return self.pointwise("where", [x, 0.0, x, scaled], {"compare": "gt"})
        raise AssertionError(name)

    def prelu(self, x, weight):
        """PReLU (nn.PReLU, F.prelu) as torch computes it: x where x > 0, else weight * x (one
        weight, or one per feature: dim 1 of a (batch, features) value)."""
        self._check_input(x)
        if not (isinstance(weight, _Marker) and weight.kind == "tensor"):
            raise self.refuse("prelu whose weight is not a parameter of the module")
        if self.lead_rank and self._tensor(weight.payload).numel() > 1:
            raise self.refuse(f"PReLU of one weight per channel of a value of {self.lead_rank} dimensions, the input's "
                              "leading sizes first (torch's channels are then its dimension 1, not the features)")
        return self.pointwise("where", [x, 0.0, x, self.pointwise("mul", [weight, x])], {"compare": "gt"})

    def logical(self, op: str, args) -> _Marker:
        """c1 & c2, c1 | c2, c1 ^ c2, ~c of comparisons (and torch.logical_*): a comparison again,
        of the conditions as numbers (1 where one holds, 0 elsewhere, NaN comparing false as in
        torch): m1 m2 > 0.5, m1 + m2 > 0.5, m1 != m2, m < 0.5. (No gradient flows through any.)"""
        conditions = [self._condition(c) for c in args]
        if len(conditions) != (1 if op == "not" else 2) or not all(
                isinstance(c, _Marker) and c.kind == "comparison" for c in conditions):
            raise self.refuse(f"logical {op} of something other than comparisons (kgen's values are floats; "
                              "it combines conditions such as (x > a) & (x < b))")
        m = [self.value(c) for c in conditions]
        if op == "not":
            return _Marker("comparison", ("lt", m[0], 0.5))
        if op == "xor":
            return _Marker("comparison", ("ne", m[0], m[1]))
        both = self.pointwise("mul" if op == "and" else "add", m)
        return _Marker("comparison", ("gt", both, 0.5))

    def _param_shape(self, marker: _Marker) -> torch.Size:
        """The shape of a parameter as the module reads it (the view's, where it reads a view)."""
        return torch.Size(marker.shape if marker.shape is not None else self._tensor(marker.payload).shape)

    def by_number(self, op: str, value, other):
        """fmod, remainder or floor_divide (ops.POINTWISE) of a value by a number."""
        what = {"floor_divide": "the floored quotient"}.get(op, "the remainder")
        if not isinstance(value, (_Id, _Marker)):
            raise self.refuse(f"{op} of a number by a tensor (kgen takes {what} of a value by a constant)")
        if not _is_number(other):
            raise self.refuse(f"{op} by something other than a number (kgen takes {what} of a value by "
                              "a constant)")
        return self.pointwise(op, [value], {"other": other})

    def where_op(self, args, kwargs):
        """torch.where(lhs <compare> rhs, a, b): the op `where` of (lhs, rhs, a, b) (kgen.ir.ops).
        Its condition must be a comparison written in the forward (no bool values in the IR)."""
        if len(args) + len(kwargs) == 1:
            raise self.refuse("torch.where(condition) of one argument (the indices where it holds)")
        a = self._bind(_where, args, kwargs)
        cond = self._condition(a["condition"])
        if not (isinstance(cond, _Marker) and cond.kind == "comparison"):
            raise self.refuse("torch.where whose condition is not a comparison written in the forward "
                              "(kgen takes x > c, x <= self.t, ...: >, >=, <, <=, ==, != of values, "
                              "constants and parameters)")
        compare, lhs, rhs = cond.payload
        for v in (a["input"], a["other"]):
            if isinstance(v, bool):
                raise self.refuse(f"torch.where with the bool {v!r} as a value")
        numbers = [v for v in (a["input"], a["other"]) if _is_number(v) and not isinstance(v, (_Id, _TensorNumber))]
        if len(numbers) == 2 and any(isinstance(v, float) for v in numbers):
            # torch.where(x > 0, 1.0, -1.0) (of two ints, an int64 tensor: integer_values)
            self._default_dtype_fact("torch.where of two Python numbers, one a float,")
        result = self.pointwise("where", [lhs, rhs, a["input"], a["other"]], {"compare": compare})
        if len(numbers) == 2 and not any(isinstance(v, float) for v in numbers) and isinstance(result, _Id):
            self.integer_values.add(result)
        return result

    def fill_like(self, fn, args, kwargs):
        """torch.zeros_like(v) / ones_like(v) / full_like(v, c): the constant (of v's shape: the
        point-wise op that reads it checks that v's shape is within its result's)."""
        signature, value = FILL_FUNCTIONS[fn]
        a = self._bind(signature, args, kwargs)
        name = fn.__name__
        if value is None:
            value = a["fill_value"]
            if not _is_number(value):
                raise self.refuse(f"torch.{name} with the fill value {value!r} (kgen takes a number)")
        if any(a[k] is not None for k in ("layout", "pin_memory")) or a["requires_grad"] or \
                a.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format):
            raise self.refuse(f"torch.{name} with layout, pin_memory, memory_format or requires_grad")
        why = self._factory_refusal(f"torch.{name}", a["dtype"], a["device"], False)
        if why:
            raise self.refuse(why)
        like = a["input"]
        if not isinstance(like, _Id):
            raise self.refuse(f"torch.{name} of something other than a value computed after the GEMM")
        return _Marker("filled", (float(value), like))

    def tensor_pair(self, op: str, args, kwargs):
        """minimum / maximum / fmax / fmin, and the other point-wise ops of two tensors
        (TENSOR_PAIR_FUNCTIONS: logaddexp)."""
        a = self._bind(_binary_tensors, args, kwargs)
        if not all(isinstance(v, (_Id, _Marker, _TensorNumber)) for v in (a["input"], a["other"])):
            raise self.refuse(f"{op} of a tensor and a number (torch takes two tensors"
                              + ("; write torch.clamp(x, max=c) or torch.clamp(x, min=c))"
                                 if op in EXTREMUM_FUNCTIONS.values() else ")"))
        return self.pointwise(op, [a["input"], a["other"]])

    def visit_method(self, name: str, args, kwargs):
        self_arg, rest = args[0], args[1:]
        if isinstance(self_arg, _Marker) and self_arg.kind == "keywords" and name == "get" \
                and 1 <= len(rest) <= 2 and not kwargs:
            # kwargs.get("scale", 2.0) in forward(self, x, **kwargs): the module is called with its
            # input alone, so the default
            return rest[1] if len(rest) == 2 else None
        if isinstance(self_arg, _Marker) and self_arg.kind == "matrix" and self_arg.shape is None \
                and (name == "t" or (name == "transpose" and _swaps_2d(rest, kwargs))
                     or (name == "permute" and _permutes_2d(rest, kwargs))):
            return _Marker("matrix_t", self_arg.payload)
        if self._transpose_of(self_arg) is not None and (
                name == "t" or (name == "transpose" and _swaps_2d(rest, kwargs))
                or (name == "permute" and _permutes_2d(rest, kwargs))):
            return self._transpose_of(self_arg)
        if isinstance(self_arg, _Marker) and self_arg.kind == "matrix_t" and name in PARAM_VIEWS:
            transposed = self.param_view(_Marker("matrix", self_arg.payload), "t", (), {})
            return self.param_view(transposed, name, rest, kwargs)
        if isinstance(self_arg, _Marker) and self_arg.kind in ("tensor", "matrix") and name in PARAM_VIEWS:
            return self.param_view(self_arg, name, rest, kwargs)
        if name in ("numel", "size", "dim") and isinstance(self_arg, _Marker) and self_arg.kind in ("tensor", "matrix"):
            # a parameter's number of elements, sizes or dimensions: numbers of the module's (its
            # size is fixed)
            shape = self._param_shape(self_arg)
            if name == "size":
                return shape if not rest and not kwargs else shape[self._bind(lambda dim: None, rest, kwargs)["dim"]]
            if rest or kwargs:
                raise self.refuse(f".{name}() of a parameter with arguments")
            return math.prod(shape) if name == "numel" else len(shape)
        if name in BROADCAST_METHODS:
            return self._broadcast(self_arg, name, rest, kwargs)
        if name in NEW_TENSOR_METHODS:
            return self._new_tensor(self_arg, name, rest, kwargs)
        if name in ("mm", "matmul", "__matmul__"):
            return self.visit_function(torch.matmul, args, kwargs)
        if name == "addmm":
            return self.visit_function(torch.addmm, args, kwargs)
        if name in INPLACE_METHODS:
            # The op itself; Tracer.run rebinds the receiver (and its aliases) to the result.
            return self.visit_method(INPLACE_METHODS[name], args, kwargs)
        if name in ("minimum", "maximum", "fmax", "fmin", *TENSOR_PAIR_FUNCTIONS.values()):
            return self.tensor_pair(name, args, kwargs)
        if name == "logit":
            return self.visit_function(torch.logit, args, kwargs)
        if name in LOGICAL_METHODS:
            return self.logical(LOGICAL_METHODS[name], args)
        if name in COMPARISON_METHODS:
            return self.visit_function(COMPARISON_METHODS[name], args, kwargs)
        if name in ("isnan", "isinf", "isfinite"):
            return self.float_class(name, *args, **kwargs)
        if name == "masked_fill":   # torch.where(mask, value, x)
            a = self._bind(lambda input, mask, value: None, args, kwargs)
            if not _is_number(a["value"]):
                raise self.refuse("masked_fill with a value that is not a number")
            return self.where_op((a["mask"], a["value"], a["input"]), {})
        if name in ("addcmul", "addcdiv"):
            return self.visit_function(getattr(torch, name), args, kwargs)
        if name == "where":   # x.where(condition, y) is torch.where(condition, x, y)
            a = self._bind(lambda input, condition, other: None, args, kwargs)
            return self.where_op((a["condition"], a["input"], a["other"]), {})
        if name in ("dim", "ndimension") and not rest and not kwargs and self._known_shape(self_arg) is not None:
            return len(self._known_shape(self_arg))
        if name == "size" and self._known_shape(self_arg) is not None:
            shape = self._known_shape(self_arg)
            a = self._bind(lambda input, dim=None: None, args, kwargs)
            if a["dim"] is None:
                return _Marker("shape", shape)
            return self.visit_function(operator.getitem, (_Marker("shape", shape), a["dim"]), {})
        if name in ("view_as", "reshape_as") and self._shape_or_none(self_arg) is not None \
                and len(rest) == 1 and self._shape_or_none(rest[0]) is not None:
            return self._view(self_arg, name[:-3], (self._shape_or_none(rest[0]),), {})
        if name in ("view", "reshape") and self._shape_or_none(self_arg) is not None:
            return self._view(self_arg, name, rest, kwargs)
        if name == "unflatten" and self.leads and self._shape_or_none(self_arg) is not None:
            # h.unflatten(0, (B, S)) of the rows: back to the input's leading sizes
            a = self._bind(lambda input, dim, sizes: None, args, kwargs)
            own = self._shape_or_none(self_arg)
            if a["dim"] not in (0, -len(own)) or not isinstance(a["sizes"], (tuple, list)):
                raise self.refuse(f"unflatten({a['dim']!r}, {a['sizes']!r}) (kgen takes unflatten(0, ...) of the rows "
                                  "into the input's leading sizes)")
            return self._lead_view(self_arg, (*a["sizes"], *own[1:]), "unflatten")
        if name == "unsqueeze" and isinstance(self_arg, _Id) and self._feeds_the_output_only():
            a = self._bind(_unsqueeze, args, kwargs)
            level = self.level(self_arg)
            if type(a["dim"]) is int and not (level == "rowflat" and a["dim"] in (1, -1)) \
                    and not (level == "tile" and a["dim"] in (1, -2)):
                return self._output_view(self_arg, "unsqueeze", (a["dim"],))   # the output's last op
        if name == "unsqueeze" and isinstance(self_arg, _Id) and self.level(self_arg) == "rowflat":
            a = self._bind(_unsqueeze, args, kwargs)
            if a["dim"] not in (1, -1):
                raise self.refuse(f"unsqueeze({a['dim']!r}) of a (batch,) value (kgen takes unsqueeze(1): (batch, 1))")
            return self._relevel(self_arg, "row")
        if name == "unsqueeze":
            a = self._bind(_unsqueeze, args, kwargs)
            x = self.value(a["input"])
            if self.level(x) == "pooled":
                raise self.refuse("a second pooling (kgen supports one pooling per module)")
            if a["dim"] not in (1, -2) or (self.level(x) != "tile" and not self._tile_input(x)):
                raise self.refuse(f"unsqueeze({a['dim']!r}) of {LEVEL_WORDS.get(self.level(x), 'a value')}; kgen "
                                  "supports x.unsqueeze(1) of a (batch, features) value, for 1-d pooling")
            return _Marker("unsqueezed", x)
        if name == "squeeze" and isinstance(self_arg, _Marker) and self_arg.kind == "unsqueezed":
            a = self._bind(_squeeze, args, kwargs)
            if a["dim"] not in (1, -2, (1,), (-2,)):
                dim = "" if a["dim"] is None else repr(a["dim"])
                raise self.refuse(f"squeeze({dim}) of a (batch, 1, "
                                  "features) value; write squeeze(1) (squeeze() also drops a batch of 1)")
            return self_arg.payload
        if name == "flatten" and isinstance(self_arg, _Marker) and self_arg.kind == "input" \
                and getattr(self.ref, "feature_dims", 1) > 1:
            # Every dimension after the batch flattened into the features (Reference.feature_dims),
            # the dimensions named on the input as get_inputs() gives it (flatten(1), or flatten(-2)
            # of a (batch, 4, 6) input): the (batch, K) tensor the tracer reads as the input.
            if _flattens_features(rest, kwargs, len(self.ref.rows_of), self.ref.feature_dims):
                return self_arg
            raise self.refuse(f"an op on the module's input before the GEMM: the input is "
                              f"{self.ref.rows_text()} of shape {self.ref.rows_of} and its first GEMM reads "
                              f"the last {self.ref.feature_dims} dimensions flattened; kgen takes flatten() of "
                              "exactly those")
        if name == "flatten" and _keeps_2d(rest, kwargs) and (
                (isinstance(self_arg, _Marker) and self_arg.kind == "input" and self.ref.input.dim() == 2)
                or (isinstance(self_arg, _Id) and self.level(self_arg) == "tile")):
            # flatten(1) of a (batch, features) tensor (a CNN head's habit, nn.Flatten): itself.
            return self_arg
        if name == "flatten" and _keeps_2d(rest, kwargs) and isinstance(self_arg, _Marker) and self_arg.kind == "group":
            return self._group_back(self_arg)
        if name == "flatten" and _keeps_2d(rest, kwargs) and isinstance(self_arg, _Marker) and self_arg.kind == "unsqueezed":
            return self_arg.payload   # a pooled (batch, 1, P) flattened back to (batch, P), as squeeze(1)
        if isinstance(self_arg, _Marker) and self_arg.kind == "input" and name in (*IDENTITY_METHODS, "detach"):
            # clone / contiguous / detach of the input: the input (detach: no gradient through
            # this read), whatever the order, before or after the GEMM.
            return _Marker("input", self_arg.payload or name == "detach")
        if isinstance(self_arg, _Marker) and self_arg.kind == "extra_input" and name in (*IDENTITY_METHODS, "detach"):
            index, detached = self_arg.payload
            return _Marker("extra_input", (index, detached or name == "detach"))
        if name == "cuda" and all(_names_a_device(a) or type(a) is int for a in rest) \
                and set(kwargs) <= {"device", "non_blocking"}:
            return self_arg   # (a move to the device it is on: the emitted forward runs on the GPU)
        if name == "to" and any(_names_the_cpu(a) for a in (*rest, *kwargs.values())) and not (
                isinstance(self_arg, _Marker) and self_arg.kind == "input"):
            # (the input moved to a device chosen in __init__, "cpu" where no GPU was: the
            # module's own device where it runs; any other value moved to the host is not)
            raise self.refuse("a value moved to the host (.to('cpu')): kgen's output stays on the GPU")
        cast = self._dtype_cast(name, rest, kwargs) if name in ("float", "to", "type") else \
            self._cast_to_dtype(self._dtype_of(rest[0])) if name == "type_as" and len(rest) == 1 and not kwargs else None
        if cast is not None:
            # x.float() / x.to(torch.float32) / x.to(x.device) / x.type_as(y) of a value: itself,
            # or (Tracer._cast) an upcast's or a cast back's node; of a comparison
            # ((x > 0).float()): its 0 / 1 as a number of the module's dtype (exact in every dtype:
            # a 16-bit module's output left in float32 by it is refused, check_upcasts)
            return self.value(self_arg) if _is_comparison(self_arg) else self._cast(self_arg, cast)
        self._check_input(self_arg)
        if name == "chunk":
            a = self._bind(_chunk, args, kwargs)
            return self.chunk(a["input"], a["chunks"], a["dim"])
        if name == "split":
            a = self._bind(lambda input, split_size, dim=0: None, args, kwargs)
            return self.split(a["input"], a["split_size"], a["dim"])
        if name == "narrow":
            a = self._bind(_narrow, args, kwargs)
            x = self._halves_dim(a["input"], a["dim"], f"narrow({a['dim']!r}, {a['start']!r}, {a['length']!r})")
            start, length = a["start"], a["length"]
            c = None if any(isinstance(v, (bool, _Id)) or type(v) is not int for v in (start, length)) else \
                self.half_of_range(x, start, start + length)
            if c is None:
                raise self.refuse(f"narrow over the features to columns other than a half (kgen takes "
                                  f"narrow(-1, 0, {self.out_features // 2}) and narrow(-1, {self.out_features // 2}, "
                                  f"{self.out_features // 2}), GLU's halves)")
            self.sizes_read.append(self.where)   # (half N as a number: the file runs at this N only)
            return self.half(x, c)
        if isinstance(self_arg, _Id) and name in ROW_FLATTEN_METHODS and (
                self.level(self_arg) == "row" or (self.level(self_arg) == "tile" and self.out_features == 1)):
            return self._flatten_row(self_arg, name, rest, kwargs)
        if isinstance(self_arg, _Id) and name == "flatten" and self.level(self_arg) == "rowflat" and \
                all(type(v) is int and v in (0, -1) for v in (*rest, *kwargs.values())) and \
                set(kwargs) <= {"start_dim", "end_dim"} and len(rest) <= 2:
            return self_arg   # flatten() of a (batch,) value: itself
        if isinstance(self_arg, _Id) and name == "flatten" and self.level(self_arg) in ("tile", "pooled") \
                and self._feeds_the_output_only():
            a = self._bind(lambda start_dim=0, end_dim=-1: None, rest, kwargs)
            if type(a["start_dim"]) is int and type(a["end_dim"]) is int:
                return self._output_view(self_arg, "flatten", (a["start_dim"], a["end_dim"]))   # (batch x N,)
        if isinstance(self_arg, _Id) and name == "flatten" and self.level(self_arg) == "tile" and not _keeps_2d(rest, kwargs):
            # (kgen takes flatten() forms, so "the tensor method .flatten() is not supported" misled)
            raise self.refuse("a flatten of a (batch, features) value into one dimension "
                              "before other ops (kgen takes flatten(1), which leaves it as it is, and a flatten to "
                              f"(batch x features,) as the forward's last op){self.rows_note()}")
        if name == "squeeze" and isinstance(self_arg, _Id) and self.level(self_arg) == "rowflat" \
                and self._feeds_the_output_only():
            # squeeze() of a (batch,) output: itself but at a batch of 1, a 0-d tensor; torch's own
            # squeeze after the kernel, as the reference's (squeeze(0) and squeeze(-1) the same)
            a = self._bind(_squeeze, args, kwargs)
            if a["dim"] in (None, 0, -1, (0,), (-1,)):
                self._tail("squeeze")
                return self_arg
        if name == "squeeze" and isinstance(self_arg, _Id) and self.level(self_arg) in ("tile", "pooled") \
                and self._row_width(self_arg) > 1:
            # squeeze(1) of a (batch, N) value, N > 1: itself in torch (a dim of size 1 only goes);
            # squeeze() or squeeze(0) would drop a batch of 1, which kgen's files run at too
            a = self._bind(_squeeze, args, kwargs)
            if a["dim"] in (1, -1, (1,), (-1,)):
                return self_arg
            dim = "" if a["dim"] is None else repr(a["dim"])
            raise self.refuse(f"squeeze({dim}) of a (batch, features) "
                              "value, which drops a batch of 1 (kgen's files run at any batch); squeeze(1) "
                              "is the one kgen takes (itself where features > 1)")
        if name in IDENTITY_METHODS:
            return self_arg
        if name == "detach":   # the identity, but no gradient flows back through it
            return self.pointwise("detach", [self_arg])
        if name == "item" and not rest and not kwargs and (self._one_element(self_arg) or (
                isinstance(self_arg, _Id) and self.level(self_arg) == "scalar")):
            # self.scale.item() of a one-element parameter or buffer (or a value of them alone):
            # a Python number of its value as forward reads it, with no gradient, as .detach()
            return self.pointwise("detach", [self_arg])
        if name == "item":
            raise self.refuse(".item() of a traced value or of a tensor of more than one element (a Python "
                              "number read back from the device each forward; kgen takes .item() of a one-element "
                              "parameter or buffer, as its value without gradient)")
        name = METHOD_ALIASES.get(name, name)
        if name == "round":
            return self.visit_function(torch.round, args, kwargs)
        if name in ("fmod", "remainder", "__mod__", "floor_divide", "__floordiv__"):
            fn = {"fmod": torch.fmod, "remainder": torch.remainder, "__mod__": torch.remainder,
                  "floor_divide": torch.floor_divide, "__floordiv__": torch.floor_divide}[name]
            return self.visit_function(fn, args, kwargs)
        if name in METHOD_UNARY:
            if rest or kwargs:   # (x.round(decimals=2): not a rounding to an integer)
                raise self.refuse(f".{name}() with arguments {rest or ''}{kwargs or ''}")
            return self.pointwise(name, [self_arg])
        if name == "reciprocal":
            return self.composite("reciprocal", self_arg)
        if name in ("sign", "sgn"):
            return self.composite("sign", self_arg)
        if name == "lerp":
            return self.visit_function(torch.lerp, args, kwargs)
        if name == "nan_to_num":
            return self.visit_function(torch.nan_to_num, args, kwargs)
        if name == "hardshrink":
            return self.visit_function(F.hardshrink, args, kwargs)
        if name in METHOD_BINARY:
            fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[METHOD_BINARY[name]]
            return self.visit_function(fn, (self_arg, *rest), kwargs)
        if name == "pow":
            return self.visit_function(torch.pow, args, kwargs)
        if name == "square":
            return self.visit_function(torch.square, args, kwargs)
        if name in ("clamp", "clip", "clamp_min", "clamp_max"):
            fn = {"clamp": torch.clamp, "clip": torch.clamp, "clamp_min": torch.clamp_min,
                  "clamp_max": torch.clamp_max}[name]
            return self.visit_function(fn, args, kwargs)
        if name in METHOD_REDUCE:
            a = self._bind(_reduce, args, kwargs)
            self._output_dtype(a, METHOD_REDUCE[name])
            return self.reduce(METHOD_REDUCE[name], a["input"], a["dim"], a["keepdim"])
        if name == "prelu" and len(rest) + len(kwargs) == 1 and set(kwargs) <= {"weight"}:
            return self.prelu(self_arg, rest[0] if rest else kwargs["weight"])   # x.prelu(w): torch.prelu
        if name in ("max", "min"):
            return self._max_min(name, args, kwargs)
        if name in STATISTIC_METHODS:
            return self.visit_function(STATISTIC_METHODS[name], args, kwargs)
        if name in ("softmax", "log_softmax"):
            a = self._softmax_args(args, kwargs)
            return self.reduce(name, a["input"], a["dim"], True)
        if name in RANDOM_METHODS:
            raise self.refuse(f"the tensor method .{name}() {RANDOM_METHODS[name]}")
        if name in DTYPE_ALIAS_METHODS:
            # (not the module's dtype, or a target kgen cannot read: Tracer._dtype_cast)
            named = {"half": torch.float16, "bfloat16": torch.bfloat16}.get(name)
            if name in ("to", "type"):   # (x.to(torch.bfloat16), x.to(dtype=...), x.type(torch.float16))
                named = next((a for a in (*rest, *kwargs.values()) if isinstance(a, torch.dtype)), None)
            if named == self.ref.input.dtype and named in (torch.bfloat16, torch.float16):
                raise self.refuse(f".{name}() in a {self.ref.input.dtype} module: a cast that names the module's "
                                  "dtype, which kgen's one file for float32, bfloat16 and float16 modules cannot "
                                  "follow (in another dtype it converts); drop it or write .to(x.dtype)")
            raise self.refuse(f".{name}() to a dtype other than the module's ({self.ref.input.dtype}, its input's), "
                              "or to one kgen cannot read (a tensor's): kgen computes every op in the module's "
                              "dtype and hands the output in it, so a cast within forward (an upcast for a "
                              "softmax or norm, then back) is taken in a float32 module only; write the op in the "
                              "module's dtype, or build the module in float32 and convert it where it runs "
                              "(model.to(dtype))")
        raise self.refuse(f"the tensor method .{name}() is not supported")


def _leaves(value) -> list:
    """Every leaf of an fx argument structure (tuples, lists, dicts)."""
    leaves: list = []
    torch.fx.node.map_aggregate(value, lambda v: leaves.append(v) or v)
    return leaves


# Ops whose meaning depends on a value's dimensions other than the last: of a value with the input's
# leading sizes, refused (Tracer._on_lead) where not taken there.
LEAD_SHAPE_OPS = frozenset({"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "expand", "expand_as",
                            "repeat", "broadcast_to", "transpose", "permute", "t", "T", "mT", "swapaxes", "swapdims",
                            "__getitem__", "getitem", "view_as", "reshape_as", "numel", "chunk", "split", "cat",
                            "stack", "unbind", "movedim", "narrow", "select", "roll", "flip", "cumsum",
                            "Flatten", "Unflatten", "new_zeros", "new_ones", "new_full", "new_empty"})
# Markers an op of a lead value may give that are values of it again (with its leading sizes).
LEAD_VALUE_KINDS = frozenset({"comparison", "input", "filled", "broadcast"})


def _keeps_2d(rest, kwargs) -> bool:
    """Whether flatten's arguments (start_dim, end_dim) leave a 2-d tensor as it is: start 1 or -1."""
    start = rest[0] if rest else kwargs.get("start_dim", 0)
    end = rest[1] if len(rest) > 1 else kwargs.get("end_dim", -1)
    return isinstance(start, int) and isinstance(end, int) and start in (1, -1) and end in (1, -1)


def _flattens_features(rest, kwargs, rank: int, feature_dims: int) -> bool:
    """Whether flatten's arguments (start_dim, end_dim), on a tensor of `rank` dimensions, flatten
    exactly its last `feature_dims`."""
    start = rest[0] if rest else kwargs.get("start_dim", 0)
    end = rest[1] if len(rest) > 1 else kwargs.get("end_dim", -1)
    return isinstance(start, int) and isinstance(end, int) and (start % rank, end % rank) == (rank - feature_dims, rank - 1)


def _permutes_2d(rest, kwargs) -> bool:
    """Whether permute's arguments swap the two dimensions of a matrix: permute(1, 0),
    permute((1, 0)), permute(dims=(1, 0)), or with -1 / -2."""
    dims = kwargs.get("dims", rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest)
    return len(dims) == 2 and all(isinstance(d, int) and not isinstance(d, _Id) for d in dims) \
        and [d % 2 for d in dims] == [1, 0]


def _has_python_float(args) -> bool:
    """Whether a Python float (not a tensor's number) is among an op's operands."""
    return any(isinstance(a, float) and not isinstance(a, _TensorNumber) for a in args)


def _is_comparison(v) -> bool:
    return isinstance(v, _Marker) and v.kind == "comparison"


def _transposes(fx_node: torch.fx.Node) -> bool:
    """Whether fx_node is a transpose or permutation of its first argument (x.T, x.mT, x.t(),
    x.transpose(...), x.permute(...), torch.t / transpose / permute): a view of it."""
    if fx_node.op == "call_method":
        return fx_node.target in ("t", "transpose", "permute")
    return fx_node.op == "call_function" and (fx_node.target in (torch.t, torch.transpose, torch.permute) or (
        fx_node.target is getattr and len(fx_node.args) == 2 and fx_node.args[1] in ("T", "mT")))


def _swaps_2d(rest, kwargs) -> bool:
    """Whether transpose's arguments swap the two dimensions of a matrix."""
    dims = tuple(rest) + tuple(kwargs.get(k) for k in ("dim0", "dim1") if k in kwargs)
    return len(dims) == 2 and all(isinstance(d, int) and not isinstance(d, _Id) for d in dims) \
        and {d % 2 for d in dims} == {0, 1}


def _resolve_view(own: tuple, target: tuple) -> tuple | None:
    """The shape x.view(*target) gives a value of shape `own` at every batch ("M" the batch,
    one -1 inferred), or None where it does not hold at every batch (or at none)."""
    if list(target).count(-1) > 1 or any(isinstance(d, int) and d < -1 for d in target):
        return None
    own_m, own_c = own.count("M"), math.prod(d for d in own if d != "M")
    known = [d for d in target if d != -1]
    m, c = known.count("M"), math.prod(d for d in known if d != "M")
    if -1 not in target:
        return tuple(target) if (m, c) == (own_m, own_c) else None
    if m == own_m and c and own_c % c == 0:
        fill = own_c // c
    elif m == own_m - 1 and c == own_c:
        fill = "M"
    else:
        return None
    return tuple(fill if d == -1 else d for d in target)


def _strip_leading_ones(shape: tuple) -> tuple:
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


# This process's traces by workload (_workload_key): `kgen generate` asks for the IR of one
# workload from several places (the problem's shape, the spec, the reference's own overrides),
# each with a Reference of its own, and a trace builds the module twice on the meta device (a
# module's __init__ can take most of it: spectral_norm's power iterations). Each caller gets
# its own copy.
_TRACES: dict = {}
_TRACES_KEPT = 256


def _workload_key(ref: Reference) -> tuple | None:
    """What a trace of `ref` depends on: the file (path and text), its module-level constants as
    set now (--set, the overrides), get_init_inputs() and the input's shape and dtype. None for
    an object that is not a loaded Reference (nothing cached)."""
    try:
        constants = tuple((name, repr(ref.module.__dict__.get(name))) for name in ref.defaults)
        return (str(ref.path), ref.sha256, constants, repr(ref.init_args()), tuple(ref.input.shape),
                str(ref.input.dtype), getattr(ref, "token_of", None), getattr(ref, "token_at", None))
    except AttributeError:
        return None


def trace(ref: Reference) -> Graph:
    """The IR of `ref`'s forward, or ir.Unsupported naming the first op kgen cannot take."""
    key = _workload_key(ref)
    if key is None:
        return _trace(ref)
    if key not in _TRACES:
        if len(_TRACES) >= _TRACES_KEPT:
            del _TRACES[next(iter(_TRACES))]   # the oldest
        _TRACES[key] = _trace_either_way(ref)
    return copy.deepcopy(_TRACES[key])


def lead_dims(ref: Reference) -> int:
    """How many leading sizes an input of more dimensions, (..., K) (Reference.rows_of), has
    before its one feature dimension: 0 for any other input (a (batch, K) one, or one the
    module flattens into its features, Reference.feature_dims)."""
    rows_of = getattr(ref, "rows_of", None)
    return len(rows_of) - 1 if rows_of is not None and getattr(ref, "feature_dims", 1) == 1 else 0


def _trace_either_way(ref: Reference) -> Graph:
    """_trace of the module on its rows (an input of more dimensions, Reference.rows_of, as
    x.reshape(-1, K)), and where that fails, with the input's leading sizes as the forward
    reads them (Tracer.leads: `B, S, D = x.shape`, x.view(B * S, D), h.view(B, S, -1),
    h.transpose(1, 2) into a BatchNorm1d, einsum('bsi,oi->bso')). The refusal said is the rows
    trace's, unless that one failed where the forward cannot run on the rows at all (it reads
    the input's other sizes): then the trace with them says what stopped it."""
    try:
        return _trace(ref)
    except Unsupported as on_rows:
        if not lead_dims(ref):
            raise
        try:
            return _trace(ref, lead_dims(ref))
        except Unsupported as with_leads:
            said = str(on_rows)
            raise (with_leads if "kgen traces the forward on its rows" in said or ROWS_FAILED in said
                   else on_rows) from None


def _meta_models(ref: Reference) -> tuple[nn.Module, nn.Module]:
    """Two models of `ref` on the meta device, one for each mode's trace: built once and copied
    (the module's __init__ runs once), or built twice where the model cannot be copied."""
    model = ref.meta_model()
    try:
        return model, copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a module holding what deepcopy cannot copy (a lock, a generator)
        return model, ref.meta_model()


def _trace(ref: Reference, leads: int = 0) -> Graph:
    """`leads`: trace an input of more dimensions with its leading sizes (Tracer.leads)."""
    training, evaluating = _meta_models(ref)
    tracer = Tracer(ref, training, leads)
    graph = tracer.run()
    # A dropout active with the module in eval mode (F.dropout(x, p), or training=not
    # self.training) drops at random there too: nothing kgen can match. (Tracing is on the
    # meta device: the second trace costs milliseconds.)
    evaluation = Tracer(ref, evaluating, leads)
    evaluation.model.eval()
    evaluated = evaluation.run()
    for d in evaluation.dropouts:
        dropout = d["name"].startswith("Dropout(")
        what, drawn = (f"dropout with p={d['p']:g}", "torch's random mask") if dropout else (d["name"], d["why"])
        raise Unsupported(f"{ref.path}: line {d['line']}: `{d['text']}`: {what} "
                          f"is active in eval mode (pass training=self.training); kgen does not reproduce {drawn}")
    # A forward that branches on self.training (fx bakes the branch in): the two modes' IRs
    # differ where no dropout explains it, and one emitted forward cannot be both. Where a dropout
    # is active in training mode, its mask is no such difference: the training mode's IR is
    # compared with the dropouts taken as the identity (a third trace).
    trained = graph
    if tracer.dropouts:
        plain = Tracer(ref, ref.meta_model(), leads)
        plain.dropout_is_identity = True
        trained = plain.run()
    if trained.describe() != evaluated.describe():
        raise Unsupported(f"{ref.path}: the forward computes other ops in training mode than in eval mode "
                          "(a branch on self.training, or on something that changes from call to call: a "
                          "global, random.random()); kgen emits one forward for both modes and every call")
    # A branch on torch.is_grad_enabled() and the like (ENVIRONMENT_QUERIES): traced again with
    # the other answer, each query the forward read; other ops there, and one forward cannot be both.
    for name, line in tracer.queries_read.items():
        owner, attr, answer, other = ENVIRONMENT_QUERIES[name]
        if other == answer:
            continue
        flipped = Tracer(ref, ref.meta_model(), leads)
        flipped.dropout_is_identity = True
        flipped.other_answers = frozenset({name})
        if flipped.run().describe() != trained.describe():
            why = (" (torch.is_grad_enabled() is False under torch.no_grad(), as inference and KernelBench's eval "
                   "call the module)" if owner is torch and attr == "is_grad_enabled" else "")
            raise Unsupported(f"{ref.path}: line {line}: the forward branches on {name}: it computes other ops "
                              f"where that is {other} than where it is {answer}, and kgen emits one forward for "
                              f"every case{why}")
    graph.dropouts = tracer.dropouts
    graph.leads = leads
    if getattr(ref, "token_of", None) is not None:
        if tracer.token is None:   # (the reference saw a selection the trace did not: no answer to give)
            raise Unsupported(f"{ref.path}: the module's first GEMM reads one token of its "
                              f"{shape_text(tuple(ref.token_of))} input, selected where kgen does not see it "
                              "(kgen takes x[:, k], x.select(1, k) or torch.select(x, 1, k) in the forward)")
        graph.token = tracer.token
    if leads:
        _check_leads(ref, graph)
    elif getattr(ref, "rows_of", None) is not None:
        _check_rows(ref, graph)
    refuse_running_buffer_reads(graph, ref)
    graph.fp32_casts = casts_that_stay_fp32(ref, tracer.fp32_casts)
    check_upcasts(ref, tracer.upcasts)
    graph.forward_defaults = tracer.forward_defaults
    graph.extra_input_names = tracer.extra_input_names
    graph.input_name = tracer.input_name
    graph.sizes_read = tracer.sizes_read
    graph.called_modules = tracer.called_modules
    graph.hyperparameters = hyperparameters_read(ref, graph)
    for part in graph.parts:   # (each part's backward raises where the module's would)
        part.no_derivative = tracer.no_derivative
    return graph



def casts_that_stay_fp32(ref, casts: list) -> list:
    """A float32 module's casts to float32 (Graph.fp32_casts: no-ops there, which make its file run
    fp32 modules only), or none where they are casts alone (no other float32 fact) and the module
    converted to bf16 (model.to(torch.bfloat16)) hands over a bf16 output: there they are upcasts
    cast back before the output (`softmax(y.float()).to(y.dtype)`), which the 16-bit build gives
    as a 16-bit module's (check_upcasts)."""
    if casts and all(len(c) == 2 for c in casts) and ref.output_dtype(torch.bfloat16) == torch.bfloat16:
        return []
    return casts


def check_upcasts(ref, upcasts: list) -> None:
    """A 16-bit module's casts to float32 (an upcast for a softmax or a norm: Tracer._fp32_cast)
    are taken where its output is in the module's dtype again (cast back: `.to(x.dtype)`): the
    values between are computed in fp32 (Node.fp32) and the output handed over in the module's
    dtype, as eager does; refused where eager hands over a float32 output, which kgen's file does
    not."""
    if not upcasts:
        return
    line, text = upcasts[0][:2]
    out = ref.output_dtype()
    if out == ref.input.dtype:
        return
    said = (f"its output is {out}" if out is not None else
            "kgen could not run the forward on the meta device to see its output's dtype")
    raise Unsupported(f"line {line}: `{text}`: a cast to float32 in a {ref.input.dtype} module is taken where "
                      f"the forward casts back to the module's dtype before its output (.to(x.dtype)), and "
                      f"{said}: kgen hands the output over in the module's dtype")


def refuse_running_buffer_reads(graph: Graph, ref) -> None:
    """Unsupported where the forward reads one of its BatchNorms' running buffers as a value. In
    training mode torch updates the buffer when the BatchNorm runs, so a read sees the old value
    or the new one by where it stands in the forward; kgen's kernels read it where the value is
    computed (before the statistics, or in stage 2 after finalize updated it: a 16-bit build
    recomputes BatchNorm's input there), and the custom op of torch.compile updates a copy. No
    one place to read it is right for every module, so none is taken (the BatchNorm itself, and
    F.batch_norm on the module's buffers, are not reads of this kind)."""
    lines = ref.source.splitlines()
    for part in graph.parts:
        buffers = {f"{bn.attrs['module']}.{name}" if bn.attrs.get("module") else name
                   for bn in part.batchnorms for name in UPDATED_IN_PLACE}
        for n in part.live():
            if n.kind == "param" and n.attrs.get("path") in buffers:
                text = lines[n.line - 1].strip() if n.line else ""
                raise Unsupported(f"{ref.path}: line {n.line}: `{text}`: reads {n.attrs['path']} as a value; "
                                  "its BatchNorm updates that buffer in place in training mode, and kgen does "
                                  "not keep a read before the update apart from one after it")


def _fingerprint(graph: Graph, dropouts: list) -> str:
    """What a trace baked into the kernels: every part's IR (its constants and op attributes)
    and the dropouts' probabilities."""
    return "\n".join([p.describe() for p in graph.parts] + [repr(d.get("p")) for d in dropouts])


def _plain(value):
    """A module attribute as the plain Python scalar the emitted file can write and compare (a
    numpy scalar as its .item()), a tuple of numbers, or None for what is no scalar setting (an
    Enum, any other object)."""
    if isinstance(value, numpy.generic):
        value = value.item()
    if type(value) in (bool, int, float, str):
        return value
    if type(value) is tuple and value and all(type(v) in (int, float) for v in value):
        return value
    return None


def _perturbations(value, widths: frozenset = frozenset()) -> list:
    """Other values of a module's scalar attribute (_plain) for hyperparameters_read to trace
    with: one on each side of it (a forward may branch on a threshold either way), a flipped bool,
    a string no op takes (a device's name: the other device), each element of a tuple so; a feature size (an int among `widths`) twice
    and half it, which keep what divides it dividing. [] for NaN (never equal: no guard can
    compare it)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [2 * value, value // 2] if value in widths else [value + 1, value - 1]
    if isinstance(value, float):
        if math.isnan(value):
            return []
        if not math.isfinite(value):
            return [1.0, -1.0]
        step = abs(value) * 0.5 + 0.25
        return [value + step, value - step]
    if isinstance(value, str) and _names_a_device(value):
        # (a device chosen in __init__, "cuda" if torch.cuda.is_available() else "cpu": the other
        # one, which a move of the input to it takes as well; the name the trace saw is the
        # host's where the file was generated without a GPU, and the GPU's where it runs)
        return ["cpu" if value.startswith("cuda") else "cuda"]
    if isinstance(value, str):
        return [value + "~kgen"]
    if isinstance(value, tuple):
        moved = [_perturbations(v, widths) for v in value]
        if not all(moved):
            return []
        return [tuple(m[0] for m in moved), tuple(m[-1] for m in moved)]
    return []


# nn.Module's own entries in an instance's __dict__ (its hooks' dicts, flags): no setting of the
# module's.
_MODULE_INTERNALS = frozenset(vars(nn.Module())) | {"training"}


# How deep into a module attribute's containers (a config object, a dict, a list) settings are
# looked for, and how many such nested settings at most are traced again (each perturbation is a
# trace on the meta device, milliseconds; a config of hundreds of fields would cost seconds).
SETTINGS_DEPTH = 3
NESTED_SETTINGS_MAX = 128


def _scalar_attributes(model: nn.Module, reference_module: str = "") -> list[tuple[str, tuple, object]]:
    """(module path, steps, value) for each scalar setting of the model and its submodules, as
    _plain gives it, but nn.Module's own: an attribute (steps (("attr", name),): multiplier,
    negative_slope, num_groups, eps, p, dim, approximate, a private _scale ...), or one inside
    an attribute's plain containers (_settings: self.cfg.scale of a config object, self.opts["slope"]
    of a dict, self.pair[0] of a list), which a forward reads as a number as well."""
    found, nested = [], 0
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if name in _MODULE_INTERNALS:
                continue
            for steps, plain in _settings(value, (("attr", name),), reference_module):
                if len(steps) > 1:
                    nested += 1
                    if nested > NESTED_SETTINGS_MAX:
                        continue
                found.append((path, steps, plain))
    return found


def _settings(value, steps: tuple, reference_module: str, depth: int = 0):
    """(steps, plain value) of each scalar setting in `value` (_plain, one _perturbations can
    move), itself or inside its plain containers (_holds_settings) down to SETTINGS_DEPTH."""
    plain = _plain(value)
    if plain is not None:
        if _perturbations(plain):
            yield steps, plain
        return
    if depth >= SETTINGS_DEPTH:
        return
    if type(value) is dict:
        items = [(("item", k), v) for k, v in value.items() if type(k) in (str, int)]
    elif type(value) is list:
        items = [(("item", i), v) for i, v in enumerate(value)]
    elif isinstance(value, nn.Module) and depth:
        # (a module kept in a plain list or dict, self.acts = [nn.LeakyReLU(slope)]: no submodule
        # of the model's, so named_modules does not reach its settings)
        items = [(("attr", k), v) for k, v in vars(value).items()
                 if k not in _MODULE_INTERNALS and k.isidentifier() and not keyword.iskeyword(k)]
    elif _holds_settings(value, reference_module):
        items = [(("attr", k), v) for k, v in vars(value).items()
                 if k.isidentifier() and not keyword.iskeyword(k) and not k.startswith("__")]
    else:
        return
    for step, v in items:
        yield from _settings(v, steps + (step,), reference_module, depth + 1)


def _holds_settings(value, reference_module: str) -> bool:
    """A plain object of settings: a dataclass's instance, a SimpleNamespace or argparse's
    Namespace, or an instance of a class the reference's file defines (a Config class); not a
    module, a tensor, or another library's object."""
    if isinstance(value, (nn.Module, torch.Tensor, type)) or not hasattr(value, "__dict__"):
        return False
    return (dataclasses.is_dataclass(value) or type(value).__name__ in ("SimpleNamespace", "Namespace")
            or (bool(reference_module) and type(value).__module__ == reference_module))


def _setting_name(path: str, steps: tuple) -> str:
    """A setting's dotted name as the guard's message gives it: gn.eps, cfg.scale, opts['slope']."""
    (_, name), rest = steps[0], steps[1:]
    return (f"{path}.{name}" if path else name) + _setting_suffix(rest)


def _setting_suffix(steps: tuple) -> str:
    """Python that reads `steps` into an attribute's containers: .scale, ['slope'], [0]."""
    return "".join(f".{key}" if kind == "attr" else f"[{key!r}]" for kind, key in steps)


def _setting_owner(owner, steps: tuple):
    """The object a setting's last step is taken of: the module for an attribute, else the
    container the steps before the last reach."""
    for kind, key in steps[:-1]:
        owner = getattr(owner, key) if kind == "attr" else owner[key]
    return owner


def _set_setting(owner, step: tuple, value) -> None:
    kind, key = step
    if kind == "item":
        owner[key] = value
    elif isinstance(owner, nn.Module):
        setattr(owner, key, value)
    else:
        object.__setattr__(owner, key, value)   # (a frozen dataclass's field too)


def _get_setting(owner, step: tuple):
    kind, key = step
    return owner[key] if kind == "item" else vars(owner)[key]


def _is_width(value, widths: frozenset) -> bool:
    """An int among the GEMMs' widths, or a tuple of them (LayerNorm's normalized_shape)."""
    values = value if isinstance(value, tuple) else (value,)
    return all(type(v) is int and v in widths for v in values)


def hyperparameters_read(ref: Reference, graph: Graph) -> list[tuple[str, object]]:
    """The module's scalar attributes (dotted path, traced value) that the trace baked into the
    IR: those whose change gives another IR, or (but for a feature size) none at all. The emitted
    forward compares each with the model's own and raises for another value: a ModelNew built with
    other constructor arguments than get_init_inputs()'s (Model(1024, 512, multiplier=3.0)), or
    changed after, would otherwise compute with the traced ones. Each attribute is traced again
    moved to each of _perturbations' values, on the meta device (milliseconds a trace). A feature
    size (in_features, out_features, num_channels, LayerNorm's normalized_shape) moved alone may
    make the trace fail where torch checks it against the tensors (the emitted forward reads those
    from the tensors: not guarded), or change the IR where the forward computes with it (x /
    self.out_features, GroupNorm(out_features, out_features)'s groups: guarded). What the emitted
    forward reads from the model itself (a BatchNorm's eps and momentum) leaves the IR as it is."""
    traced = _fingerprint(graph, graph.dropouts)
    widths = frozenset(w for p in graph.parts for w in (p.in_features, p.out_features))
    read = []
    for path, steps, value in _scalar_attributes(ref.meta_model(), getattr(ref.module, "__name__", "")):
        for other in _perturbations(value, widths):
            model = ref.meta_model()
            owner = _setting_owner(model.get_submodule(path), steps)
            kept = _get_setting(owner, steps[-1])
            _set_setting(owner, steps[-1], other)
            tracer = Tracer(ref, model, getattr(graph, "leads", 0))
            try:
                moved = _fingerprint(tracer.run(), tracer.dropouts)
            except Exception:  # noqa: BLE001 - a value the module (or kgen) refuses: the trace read it
                if _is_width(value, widths):
                    continue
                moved = None
            finally:
                # Put back: the submodule may be an object the reference shares between every
                # model it builds (ACT2MOD = {"gelu": nn.GELU(), ...} at module level), and one
                # left moved made every later Model(...) compute with the moved value (a config
                # object get_init_inputs() gives is such an object as well).
                _set_setting(owner, steps[-1], kept)
            if moved != traced:
                read.append((_setting_name(path, steps), value))
                if len(steps) > 1:   # (how the emitted forward reads it: Graph.hyperparameter_reads)
                    graph.hyperparameter_reads[read[-1][0]] = (_setting_name(path, steps[:1]),
                                                               _setting_suffix(steps[1:]))
                break
    return read


# The rows check (_check_rows) builds the module on the CPU in fp64: at most this many elements of
# parameters and buffers (2 GiB); a larger module with an input of more dimensions is refused.
ROWS_CHECK_MAX_ELEMENTS = 1 << 28


def rows_output(out: torch.Tensor, lead: tuple, at: int = 0) -> torch.Tensor:
    """The module's output on an input of leading sizes `lead`, from its output `out` on the
    input's rows: rows back to those sizes, a scalar as it is. `at`: the dimension of `out` that
    is the rows (rows_at), after `at` dimensions of size 1 that a parameter of more dimensions
    broadcast them to (a LayerScale's (1, 1, N) times the rows' (R, N) is (1, R, N)); on the input
    itself the same parameter's dimensions meet `lead` (broadcasting aligns the last ones), and
    those it has beyond stay in front. (The emitted forward does the same: model_new.py.j2,
    rows_input.)"""
    if out.dim() == 0:
        return out
    return out.reshape((1,) * (max(0, at + 1 - len(lead)) if at else 0) + (*lead, *out.shape[at + 1:]))


def rows_at(graph: Graph) -> int:
    """The dimension of the module's output that is the input's rows (rows_output): 0 but for a
    value of the input's shape (level full) that a parameter of more dimensions gives, where the
    batch "M" is further in."""
    out = graph.node(graph.output)
    return out.shape.index("M") if out.level == "full" and "M" in out.shape else 0


def _check_rows(ref: Reference, graph: Graph) -> None:
    """An input of more dimensions, (..., K) (Reference.rows_of), or (batch, d1, d2, ...) that the
    module flattens into its first GEMM's K = d1 d2 ... (Reference.feature_dims): kgen takes the
    module as the same module on the input's rows, x.reshape(-1, K), as a Linear over the last
    dimension is, its output reshaped back (rows_output). Whether the module's other ops are so
    is not in the trace (dim=1 of a 3-D value is not the features): rows_differ runs it both ways."""
    shape, dims = ref.rows_of, getattr(ref, "feature_dims", 1)
    features = tuple(shape[len(shape) - dims:])
    k = torch.Size(features).numel()
    over = ("a Linear over its last dimension" if dims == 1 else
            f"a first GEMM over its last {dims} dimensions flattened ({' x '.join(map(str, features))} = {k})")
    where = (f"{ref.path}: the input is (..., {', '.join(map(str, features))}) (shape {shape}); kgen takes {over} "
             f"as the same module on the input's rows, x.reshape(-1, {k})")
    meta = ref.meta_model()
    elements = sum(t.numel() for t in (*meta.parameters(), *meta.buffers()))
    if elements > ROWS_CHECK_MAX_ELEMENTS:
        raise Unsupported(f"{where}, which it checks by running the module on the CPU: {elements:,} "
                          f"elements of parameters and buffers are too many for that (at most "
                          f"{ROWS_CHECK_MAX_ELEMENTS:,}); give kgen a (batch, {k}) input")
    # (the module runs on the flattened input as it is: a flatten that changes a (batch, features)
    # tensor, flatten(-2) of one, is no flatten there)
    flatten_hint = ("; or flatten the input as flatten(1) or x.view(x.size(0), -1), which leave a "
                    f"(batch, {k}) input as it is") if dims > 1 else ""
    why = rows_differ(ref, len(shape), features, rows_at(graph))
    if why is not None:
        raise Unsupported(f"{where}, and this module {why}; give kgen a (batch, {k}) input{flatten_hint}")


def _small_leads(rank: int) -> list[tuple]:
    """Leading sizes to run an input of `rank` dimensions, (..., K), at: (2, 3, 2, ...) and each of
    them 1 in turn (a bare squeeze() drops those)."""
    base = [2, 3] + [2] * (rank - 3)
    return [tuple(base)] + [tuple(1 if j == i else n for j, n in enumerate(base)) for i in range(len(base))]


def _fp64_models(ref: Reference):
    """The module on the CPU in fp64, built as get_init_inputs() builds it (seed 0): ("as built",
    model), then the same model with every floating parameter moved at random (a gate initialized
    to 0 hides an op over another dimension): ("moved at random", model). The caller's draws
    between the two come before the move's, as they did written out in each caller."""
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = ref.Model(*ref.init_args()).double()
    yield "as built", model
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.add_(torch.randn_like(p) * (0.5 * (p.abs().mean().item() or 1.0)))
    yield "moved at random", model


def _check_leads(ref: Reference, graph: Graph) -> None:
    """A module traced with its input's leading sizes (Tracer.leads): the trace took each op as
    the same op of the rows, and ops over other dimensions are refused there; as rows_differ
    does for a trace on the rows, this runs it: the IR on the rows against the module on the
    input, on the CPU in fp64, at small leading sizes and at each with one of them 1, built as
    get_init_inputs() builds it and with its parameters moved at random, in training and in
    eval mode (buffers as the module leaves them)."""
    shape = ref.rows_of
    k = int(shape[-1])
    where = (f"{ref.path}: the input is (..., {k}) (shape {shape}) and the forward reads its leading sizes; kgen "
             f"traced it as the same module on its rows, x.reshape(-1, {k})")
    meta = ref.meta_model()
    elements = sum(t.numel() for t in (*meta.parameters(), *meta.buffers()))
    if elements > ROWS_CHECK_MAX_ELEMENTS:
        raise Unsupported(f"{where}, which it checks by running the module on the CPU: {elements:,} elements of "
                          f"parameters and buffers are too many for that (at most {ROWS_CHECK_MAX_ELEMENTS:,})")
    leads = _small_leads(len(shape))
    at_dim = rows_at(graph)
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            for weights, model in _fp64_models(ref):
                for lead in leads:
                    x = torch.randn(*lead, k, dtype=torch.float64)
                    # (get_inputs()' tensors after the input, (..., d) of its leading sizes, as
                    # Reference._extra_input takes them: the IR reads their rows)
                    extras = [torch.randn(*lead, int(t.shape[-1]), dtype=torch.float64)
                              for t in getattr(ref, "extra_inputs", ())]
                    for training in ((False,) if graph.dropouts else (True, False)):
                        model.train(training)
                        twin = copy.deepcopy(model)
                        with torch.no_grad():
                            whole = model(x.clone(), *(t.clone() for t in extras))
                            rows = rows_output(graph.interpret(x.reshape(-1, k), twin,
                                                               *(t.reshape(-1, t.shape[-1]) for t in extras)),
                                               lead, at_dim)
                        at = f"in {'training' if training else 'eval'} mode, on a {tuple(x.shape)} input, parameters {weights}"
                        if whole.shape != rows.shape or not torch.allclose(whole, rows, rtol=1e-9, atol=1e-12, equal_nan=True):
                            differ = ("" if whole.shape != rows.shape else
                                      f", by up to {(whole - rows).abs().max().item():.2g}")
                            raise Unsupported(f"{where}, and the module computes otherwise ({at}: its output "
                                              f"{tuple(whole.shape)}, the trace's {tuple(rows.shape)}{differ}: an op over "
                                              "another dimension than the last?); give kgen a (batch, "
                                              f"{k}) input")
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - the module failing on the input is the reason
            raise Unsupported(f"{where}, and checking that failed ({type(e).__name__}: {str(e)[:200]})") from None


# How rows_differ says the module failed on its rows (a forward that reads the input's other sizes),
# where _trace_either_way takes the trace with the leading sizes' refusal as the one to show.
ROWS_FAILED = "on its rows"


def rows_differ(ref: Reference, rank: int, features: tuple, rows_dim: int = 0) -> str | None:
    """Why the module does not compute on an input of `rank` dimensions, (..., *features), as on
    its rows, x.reshape(-1, K) with the output reshaped back (rows_output, the rows at its
    dimension `rows_dim`); None where it does.
    Checked by running the module both ways, on the CPU in fp64, built as get_init_inputs()
    builds it and again with every parameter moved at random (a gate initialized to 0 hides an
    op over another dimension), at small leading sizes and at each with one of them 1 (a bare
    squeeze() drops those), in training and in eval mode (a dropout's mask is the same both
    ways: one seed, as many elements in the same order). The caller's random states are left as
    they were."""
    dims = len(features)
    k = torch.Size(features).numel()
    leads = _small_leads(rank)
    if rank == dims:
        leads = [()]   # (one sample, as a Linear takes a 1-D input: its one row)
    if dims > 1:
        # Every dimension after the batch flattened: both ways read the same (batch, K) tensor
        # after the flatten, so a batch of 1 shows nothing a squeeze() would, and a training
        # BatchNorm cannot take it. Two batches, of 2 and 3.
        leads = [(2,), (3,)]
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    way = "built"   # (which way failed, for the message: the module on its rows is the trace's question)
    with torch.random.fork_rng(devices=devices):
        try:
            for weights, model in _fp64_models(ref):
                if weights == "as built":
                    # (only buffers move in a forward, a training BatchNorm's: each run starts from these)
                    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
                for lead in leads:
                    x = torch.randn(*lead, *features, dtype=torch.float64)
                    # (get_inputs()' tensors after the input: the same leading dimensions, their own last)
                    extras = [torch.randn(*lead, int(t.shape[-1]), dtype=torch.float64)
                              for t in getattr(ref, "extra_inputs", ())]
                    for training in (True, False):
                        outs = []
                        for way, value, others in (("on the input", x, extras),
                                                   (ROWS_FAILED, x.reshape(-1, k), [e.reshape(-1, e.shape[-1]) for e in extras])):
                            with torch.no_grad():
                                for name, b in model.named_buffers():
                                    b.copy_(buffers[name])
                                model.train(training)
                                torch.manual_seed(1)
                                outs.append(model(value.clone(), *(e.clone() for e in others)))
                        whole, rows = outs[0], rows_output(outs[1], lead, rows_dim)
                        at = (f"in {'training' if training else 'eval'} mode, on a {tuple(x.shape)} input, "
                              f"parameters {weights}")
                        if whole.shape != rows.shape:
                            return (f"computes otherwise on them ({at}, its output is {tuple(whole.shape)}, and "
                                    f"its rows' output reshaped back {tuple(rows.shape)})")
                        if not torch.allclose(whole, rows, rtol=1e-9, atol=1e-12, equal_nan=True):
                            return (f"computes otherwise on them ({at}, its values differ, by up to "
                                    f"{(whole - rows).abs().max().item():.2g}: an op over another dimension "
                                    "than the last?)")
        except Exception as e:  # noqa: BLE001 - the module failing one way is the reason
            return f"fails one of the two ways ({way}, {type(e).__name__}: {str(e)[:200]})"
    return None


# takes_rows builds a (batch, K) module on the CPU in fp64 to see whether it computes on (..., K)
# as on its rows: at most this many elements of parameters and buffers (~1 s of a generate on 2
# cores); a larger module's file takes (batch, K) alone, and says so.
TAKES_ROWS_MAX_ELEMENTS = 1 << 24
_TAKES_ROWS: dict = {}


def takes_rows(ref: Reference, rank: int = 3) -> bool:
    """Whether a module whose get_inputs() gives (batch, K) computes on an input of `rank`
    dimensions, (..., K) (3: more dimensions; 1: one sample, (K,)), as on its rows (rows_differ;
    a Linear over the last dimension followed by point-wise ops and reductions over dim=-1 does, a
    softmax over dim=1 or a BatchNorm1d does not): then the emitted forward takes such an input,
    as eager's module does (a transformer's (batch, tokens, features), a policy's one
    observation). Cached per reference file, constructor and rank."""
    if getattr(ref, "rows_of", None) is not None or getattr(ref, "token_of", None) is not None \
            or ref.input.dim() != 2 or getattr(ref, "extra_inputs", ()):
        return False   # (a module with extra inputs, or of one token: its file takes the shapes get_inputs() gives)
    key = (str(ref.path), getattr(ref, "sha256", None), repr(ref.init_args()), int(ref.input.shape[1]), rank)
    if key not in _TAKES_ROWS:
        meta = ref.meta_model()
        elements = sum(t.numel() for t in (*meta.parameters(), *meta.buffers()))
        _TAKES_ROWS[key] = (elements <= TAKES_ROWS_MAX_ELEMENTS
                            and rows_differ(ref, rank, (int(ref.input.shape[1]),)) is None)
    return _TAKES_ROWS[key]


def describe(graph: Graph) -> str:
    return graph.describe()

