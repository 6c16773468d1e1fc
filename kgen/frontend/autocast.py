"""The dtype eager gives a module's output inside CUDA's torch.autocast, read from its fx graph.

An emitted file runs its module inside torch.autocast as eager's Linear does there, an fp32
module's GEMM in autocast's 16-bit dtype, and hands its output over in the dtype eager's ops give
it: the 16-bit dtype, or fp32. That is a fact of torch's ops as the module calls them, not of
kgen's IR (which writes softmax with exp, logsigmoid with softplus, `x += b` and `x + b` alike),
so it is read here from the forward's fx graph, one torch call at a time. A value's kind is the
set of reasons it would be fp32 (empty: the 16-bit dtype):

- the ops autocast runs in 16 bits (linear, matmul, addmm, einsum, prelu, ...) give {};
- the ops it runs in fp32 (aten/src/ATen/autocast_mode.cpp's fp32 lists: exp, log, pow, softplus,
  softmax, log_softmax, logsumexp, sum, cumsum, norm, layer_norm, group_norm, ...), and the
  functions torch writes with one of them (softmin, normalize, square), give {"fp32"};
- an in-place op (`x += b`, x.mul_(s)), a view, BatchNorm and dropout give their input's; a
  size (x.size(), x.shape) is no tensor and gives {};
- any other op gives what torch's type promotion makes of its tensor operands, the union of
  theirs: a parameter of one or more dimensions is fp32 where the module is ({"param"}), the
  module's input where it is given in fp32 ({"input"}); a Python number, a 0-d or bool tensor, a
  comparison have no say ({}).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

# What makes a value fp32 under autocast: an fp32 op, an fp32 parameter, the fp32 input.
REASONS = ("fp32", "param", "input")
# fx node meta of an op made while forward had CUDA's autocast turned off (torch.autocast(enabled=False),
# trace.Tracer.unseen_by_fx_refused): it runs in its operands' dtypes, promoted, as without autocast.
AUTOCAST_OFF = "kgen_autocast_off"
NONE = frozenset()
LOW_CALLS = frozenset({"linear", "matmul", "mm", "addmm", "__matmul__", "__rmatmul__", "einsum", "prelu", "bmm",
                       "baddbmm", "addbmm", "mv", "addmv", "addr", "conv1d", "conv2d", "half", "bfloat16"})
FP32_CALLS = frozenset({"acos", "arccos", "asin", "arcsin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2",
                        "log1p", "reciprocal", "rsqrt", "sinh", "tan", "pow", "__pow__", "__rpow__", "square",
                        "softplus", "layer_norm", "group_norm", "norm", "frobenius_norm", "nuclear_norm",
                        "cosine_similarity", "dist", "cdist", "pdist", "renorm", "logsumexp", "prod", "softmax",
                        "log_softmax", "softmin", "cumprod", "cumsum", "vector_norm", "matrix_norm", "sum",
                        "normalize", "float", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
# One op of mixed operand dtypes whose result is its input's (BatchNorm's fp32 buffers and
# parameters do not promote a 16-bit input).
SAME_CALLS = frozenset({"batch_norm", "dropout", "alpha_dropout", "feature_alpha_dropout", "masked_fill",
                        "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d"})
# Values that are not tensors (sizes: x.size(), x.shape, x.dim(); the Python number of
# self.s.item(), which promotes nothing, where the (1,) parameter itself would) and views, whose
# result is the tensor they view (x.view(x.size()[:-1] + (n,)): the sizes have no say).
SIZES = frozenset({"size", "dim", "numel", "getattr", "len", "__len__", "item"})
VIEWS = frozenset({"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t",
                   "contiguous", "expand", "expand_as", "view_as", "reshape_as", "narrow", "select", "unbind"})
COMPARISONS = frozenset({"gt", "ge", "lt", "le", "eq", "ne", "greater", "greater_equal", "less", "less_equal",
                         "__gt__", "__ge__", "__lt__", "__le__", "__eq__", "__ne__", "isnan", "isinf", "isfinite",
                         "logical_and", "logical_or", "logical_not", "logical_xor", "__and__", "__or__",
                         "__xor__", "__invert__", "and_", "or_", "xor", "invert", "signbit"})
MODULE_CALLS = {nn.Linear: "linear", nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax", nn.Softmin: "softmin",
                nn.GroupNorm: "group_norm", nn.LayerNorm: "layer_norm", nn.Softplus: "softplus", nn.PReLU: "prelu",
                nn.BatchNorm1d: "batch_norm", nn.SyncBatchNorm: "batch_norm", nn.Dropout: "dropout",
                nn.AlphaDropout: "alpha_dropout", nn.MaxPool1d: "max_pool1d", nn.AvgPool1d: "avg_pool1d",
                nn.Conv1d: "conv1d"}


def promoted(kinds) -> frozenset:
    return frozenset().union(*kinds)


def _tensor_kind(t) -> frozenset:
    """A module's tensor as an operand: a float tensor of one or more dimensions promotes where
    the module is fp32."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dim() == 0:
        return NONE
    return frozenset({"param"})


def _attribute(model: nn.Module, path: str):
    obj = model
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def call_name(node: torch.fx.Node, model: nn.Module) -> str:
    if node.op == "call_module":
        module = model.get_submodule(node.target)
        return next((name for cls, name in MODULE_CALLS.items() if isinstance(module, cls)), type(module).__name__)
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", str(node.target))


def _dtype_source(v, kinds: dict) -> frozenset | None:
    """The autocast kind of the value whose dtype `v` names as a cast's target: t.dtype (fx's
    getattr of t) or a tensor t itself (x.to(t), x.type_as(t)); None where `v` names no value's."""
    if not isinstance(v, torch.fx.Node):
        return None
    if v.op == "call_function" and v.target is getattr and len(v.args) == 2 and v.args[1] == "dtype" \
            and isinstance(v.args[0], torch.fx.Node):
        return kinds.get(v.args[0], NONE)
    if v.op == "call_function" and v.target is getattr:
        return None   # (x.device and other attributes: no dtype)
    return kinds.get(v, NONE)


def node_kind(node: torch.fx.Node, model: nn.Module, kinds: dict, in_place: bool = False) -> frozenset:
    """The autocast kind of fx node `node`'s value, from its operands' `kinds`; `in_place`: the
    op writes its first operand (its result keeps that operand's dtype)."""
    if node.op == "placeholder":
        return frozenset({"input"})
    if node.op == "get_attr":
        return _tensor_kind(_attribute(model, node.target))
    operands: list[frozenset] = []
    torch.fx.node.map_aggregate((node.args, node.kwargs), lambda v: operands.append(
        kinds.get(v, NONE) if isinstance(v, torch.fx.Node) else NONE) or v)
    first = next((kinds.get(a, NONE) for a in node.args if isinstance(a, torch.fx.Node)), NONE)
    name = call_name(node, model)
    if node.meta.get(AUTOCAST_OFF) and (name in LOW_CALLS or name in FP32_CALLS) and name not in ("half", "bfloat16", "float"):
        return promoted(operands)
    if name in LOW_CALLS:
        return NONE
    if name in FP32_CALLS:
        return frozenset({"fp32"})
    if name in ("to", "type", "type_as"):
        dtypes = [v for v in (*node.args, *node.kwargs.values()) if isinstance(v, torch.dtype)]
        if dtypes and dtypes[0] == torch.float32:
            return frozenset({"fp32"})
        if dtypes and dtypes[0] in (torch.bfloat16, torch.float16):
            return NONE
        # A cast to another value's dtype (b.to(y.dtype), b.to(y), b.type_as(y)): that value's,
        # under autocast too (an fp32 parameter cast to the dtype of autocast's 16-bit Linear
        # output is 16-bit, not the parameter's fp32).
        like = next((_dtype_source(v, kinds) for v in (*node.args[1:], *node.kwargs.values())
                     if _dtype_source(v, kinds) is not None), None)
        return first if like is None else like
    if name in COMPARISONS or name in SIZES:
        return NONE
    if name in SAME_CALLS or name in VIEWS or in_place:
        return first
    return promoted(operands)


def output_kind(fx_graph: torch.fx.Graph, model: nn.Module, in_place) -> tuple:
    """The autocast kind of the module's output, sorted (REASONS' names). `in_place(node)`:
    whether fx node `node` writes its first operand (the tracer's reading: fx records `x += b`
    as `x + b`, which the tracer tells apart by the forward's bytecode)."""
    kinds: dict = {}
    for node in fx_graph.nodes:
        if node.op == "output":
            out = node.args[0]
            return tuple(sorted(kinds.get(out, NONE))) if isinstance(out, torch.fx.Node) else ()
        kinds[node] = node_kind(node, model, kinds, in_place(node))
    return ()


def output_is_fp32(kind, input_fp32: bool, module_fp32: bool) -> bool:
    """Whether an output of autocast kind `kind` is fp32, for an input and a module in fp32 or not."""
    return "fp32" in kind or ("input" in kind and input_fp32) or ("param" in kind and module_fp32)


@contextlib.contextmanager
def asked_enabled():
    """While open, each torch.autocast made records whether it asked to be enabled
    (`_kgen_enabled`): torch turns CUDA's off where no GPU is (`_enabled` False, said with a
    warning), and the tracer refuses an autocast that asked to be on even there. Open where a
    reference's autocasts are made: its file's statements (a decorator on forward), its
    Model() (one made in __init__), the trace."""
    cls = torch.amp.autocast_mode.autocast
    init = cls.__init__
    if getattr(init, "_kgen_records", False):
        yield
        return

    def recording_init(obj, device_type, dtype=None, enabled=True, cache_enabled=None):
        obj._kgen_enabled = bool(enabled)
        init(obj, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    recording_init._kgen_records = True
    cls.__init__ = recording_init
    try:
        yield
    finally:
        cls.__init__ = init
