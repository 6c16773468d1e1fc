"""Algebraic rewrites of the epilogue IR, applied before lowering.

Two kinds:

- `simplify`: rewrites that are exact in fp32 (the rewritten graph computes bit for bit what the
  traced one does, NaN and infinities included), so they are always applied: a reduction over
  a width-1 value is that value (sum, mean, max and min of one element); `x + x` is `2 * x`;
  two clamps in a row are one clamp. One more is exact for finite values only: `x - x` is 0
  (an infinite or NaN x gives NaN), and the ops after it fold into a constant (in fp32, as
  torch computes them); when the output is a constant the module runs no GEMM at all. The
  constant records what torch gives where x is not finite (`nonfinite`: the ops after x - x
  folded on NaN) and what x read (`reads_gemm`: x's row and W; `reads`: parameter paths), and
  the kernels output that value in a row of x holding a NaN or an infinity, and everywhere
  when W or one of those parameters holds one (kernels/constant.cuh).
- `row_sum_as_gemv`: a sum or mean over the features of an affine function of the GEMM output is a
  matrix-vector product (sum_n (s_n * (x . W_n) + b_n) = x . (sum_n s_n W_n) + sum_n b_n), which
  reads W once instead of computing the M x N GEMM. It rounds differently, so it is a candidate
  (Spec.gemv) that the search validates like any other; kgen/lower/forward.py lowers it.
- `pool_as_weight`: AvgPool1d over the features of a Linear's output is the Linear of W and b
  averaged over the pooling's windows of rows: a GEMM of N / stride rows. It rounds differently
  too (W's means rounded once), and is always applied where it holds: the gate judges it.

Each applied rewrite is described in one line, which the emitted file's header repeats.
"""

from __future__ import annotations

import dataclasses
import math
import struct

import torch

from kgen.ir import ops
from kgen.ir.graph import TAIL_LEVELS, Graph, Node, affine_chain, pooled_width, self_attr, window_means_code

_CLAMPS = ("clamp", "hardtanh")


def _bounds(n: Node) -> tuple[float | None, float | None]:
    if n.op == "hardtanh":
        return n.attrs.get("min_val", -1.0), n.attrs.get("max_val", 1.0)
    return n.attrs.get("min"), n.attrs.get("max")


def _clip(v: float | None, lo: float | None, hi: float | None) -> float | None:
    if v is None:
        return None
    if lo is not None:
        v = max(v, lo)
    if hi is not None:
        v = min(v, hi)
    return v


def merge_clamps(inner: tuple, outer: tuple) -> tuple[float | None, float | None] | None:
    """clamp(clamp(x, l1, h1), l2, h2) as one clamp(x, L, H): L = clip(l1, l2, h2) (or l2 when
    there is no l1), H likewise; None when a bound pair is inverted (torch's clamp then gives
    max; leave those alone)."""
    (l1, h1), (l2, h2) = inner, outer
    if any(lo is not None and hi is not None and lo > hi for lo, hi in (inner, outer)):
        return None
    lo = _clip(l1, l2, h2) if l1 is not None else l2
    hi = _clip(h1, l2, h2) if h1 is not None else h2
    if lo is not None and hi is not None and lo > hi:
        return None
    return lo, hi


def _same(a: float, b: float) -> bool:
    """a and b are the same fp32 value (NaN the same as NaN, -0.0 not 0.0)."""
    return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)


def _fold(node: Node, values: list[float]) -> float:
    """The op of `node` on constants, as torch computes it in fp32."""
    return float(ops.torch_apply(node.op, [torch.tensor(v, dtype=torch.float32) for v in values], node.attrs))


def _constant(value: float, nonfinite: float, reads_gemm: bool, reads: tuple) -> dict:
    """A constant's attrs. Where it comes from x - x (rewrite of a value that torch computes):
    `nonfinite` is what torch gives where that x is not finite (NaN for x - x itself, then
    what the ops after it make of NaN), and the x reads x's row and W (`reads_gemm`) and the
    parameters at the paths `reads`; the kernels output `nonfinite` in a row where x's row
    holds a NaN or an infinity, and everywhere where W or one of those parameters does. A
    constant that does not change (pow(NaN, 0) is 1) reads nothing."""
    if _same(value, nonfinite) or not (reads_gemm or reads):
        return {"value": value}
    return {"value": value, "nonfinite": nonfinite, "reads_gemm": reads_gemm, "reads": reads}


def _reads(nodes: list[Node], i: int) -> tuple[bool, tuple]:
    """Whether node i's value depends on the GEMM (x's row and W), and the paths of the
    parameters it reads (those of constants it was folded from included), sorted."""
    gemm, paths, stack, seen = False, set(), [i], set()
    while stack:
        n = nodes[stack.pop()]
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.kind == "gemm":
            gemm = True
        elif n.kind == "param":
            paths.add(n.attrs["path"])
        elif n.kind == "const":
            gemm |= n.attrs.get("reads_gemm", False)
            paths.update(n.attrs.get("reads", ()))
        stack.extend(n.args)
    return gemm, tuple(sorted(paths))


def _reads_text(reads_gemm: bool, reads: tuple) -> str:
    what = (["a row of x (that row)", "W (every row)"] if reads_gemm else []) + [f"{p} (every row)" for p in reads]
    return "a NaN or infinity in " + ", ".join(what) if what else "never: x reads nothing"


def simplify(graph: Graph) -> tuple[Graph, list[str]]:
    """The graph with the exact rewrites applied, and what was applied."""
    nodes: list[Node] = []
    new_id: dict[int, int] = {}
    applied: list[str] = []

    def append(kind, level, args, op="", attrs=None, like: Node | None = None) -> int:
        n = Node(len(nodes), kind, level, tuple(args), op, dict(attrs or {}),
                 like.line if like else None, like.text if like else "", like.shape if like else (),
                 # (a value eager keeps in float32 keeps the mark)
                 bool(like is not None and like.fp32 and kind != "const"))
        n.linear_bias = bool(like is not None and like.linear_bias and kind == "pointwise" and op == "add")
        nodes.append(n)
        return n.id

    def const(value: float) -> int:
        for n in nodes:
            if n.kind == "const" and n.level == "scalar" and n.attrs["value"] == value:
                return n.id
        return append("const", "scalar", (), attrs={"value": value})

    for old in graph.nodes:
        args = tuple(new_id[a] for a in old.args)
        at = f"line {old.line}" if old.line else "the module"
        if old.kind == "reduce" and nodes[args[0]].level in ("row", "rowflat"):
            applied.append(f"{at}: {old.op} over a width-1 value is that value")
            if old.level == nodes[args[0]].level:
                new_id[old.id] = args[0]
            else:
                new_id[old.id] = append("pointwise", old.level, args, "identity", like=old)
            continue
        if old.kind == "pointwise" and old.op == "sub" and len(args) == 2 and args[0] == args[1] \
                and old.level not in TAIL_LEVELS:
            reads_gemm, reads = _reads(nodes, args[0])
            applied.append(f"{at}: x - x is 0 where x is finite (NaN where it is not: "
                           f"{_reads_text(reads_gemm, reads)})")
            new_id[old.id] = append("const", old.level, (), attrs=_constant(0.0, math.nan, reads_gemm, reads),
                                    like=old)
            continue
        if old.kind == "pointwise" and all(nodes[a].kind == "const" for a in args) and \
                any(nodes[a].level != "scalar" for a in args):
            # A constant of a tensor's shape (from x - x): torch computes on it in fp32, once
            # as it is and once with each x - x NaN (where what its x reads is not finite).
            value = _fold(old, [nodes[a].attrs["value"] for a in args])
            nonfinite = _fold(old, [nodes[a].attrs.get("nonfinite", nodes[a].attrs["value"]) for a in args])
            reads_gemm = any(nodes[a].attrs.get("reads_gemm", False) for a in args)
            reads = tuple(sorted({path for a in args for path in nodes[a].attrs.get("reads", ())}))
            applied.append(f"{at}: {old.op} of constants is the constant {value!r}" +
                           (f" ({nonfinite!r} where what it reads is not finite)"
                            if (reads_gemm or reads) and not _same(value, nonfinite) else ""))
            new_id[old.id] = append("const", old.level, (), attrs=_constant(value, nonfinite, reads_gemm, reads),
                                    like=old)
            continue
        if old.kind == "pointwise" and old.op == "add" and len(args) == 2 and args[0] == args[1]:
            applied.append(f"{at}: x + x is 2 * x")
            new_id[old.id] = append("pointwise", old.level, (args[0], const(2.0)), "mul", like=old)
            continue
        if old.kind == "pointwise" and old.op in _CLAMPS:
            inner = nodes[args[0]]   # (still computed for its other users, if any)
            merged = None
            if inner.kind == "pointwise" and inner.op in _CLAMPS:
                merged = merge_clamps(_bounds(inner), _bounds(old))
            if merged is not None:
                applied.append(f"{at}: two clamps in a row are one clamp")
                lo, hi = merged
                new_id[old.id] = append("pointwise", old.level, inner.args, "clamp",
                                        {"min": lo, "max": hi}, like=old)
                continue
        new_id[old.id] = append(old.kind, old.level, args, old.op, old.attrs, like=old)
    if not applied:
        return graph, []
    out = graph.with_nodes(nodes, new_id[graph.output])
    return out, applied


@dataclasses.dataclass
class RowSum:
    """A sum or mean over the features of an affine function of the GEMM output."""
    reduce: Node
    steps: list[Node]      # the affine steps from the GEMM output to the reduced value


def row_sum_of_gemm(graph: Graph) -> RowSum | None:
    """The reduction `row_sum_as_gemv` applies to: the only use of the GEMM output is a sum or
    mean over dim 1 of an affine (per-column scale and shift) function of it, and nothing else
    of width N is live, nor reads one (no BatchNorm, no GroupNorm, no pooling). None when the
    graph is not of that form, and for the last part of chained GEMMs (its x is computed by the
    part before it, and the product is a GEMM there anyway)."""
    if graph.previous is not None:
        return None
    live = graph.live()
    tiles = [n for n in live if n.level == "tile"]
    reductions = [n for n in live if n.kind == "reduce" and graph.node(n.args[0]).level == "tile"]
    if len(reductions) != 1 or reductions[0].op not in ("sum", "mean"):
        return None
    (r,) = reductions
    root, steps = affine_chain(graph, r.args[0], past_roundings=True)
    if root != graph.gemm.id:
        return None
    # The chain's values, its upcasts among them (no steps: affine_chain passes them by): the
    # only tile values live, and none read by anything but the chain's next value or the reduction
    # (a pooling of z is no tile value, and the rewrite forms no z for it).
    chain, t = set(), r.args[0]
    while t != root:
        chain.add(t)
        t = next(a for a in graph.node(t).args if graph.node(a).level == "tile")
    if {n.id for n in tiles} != chain | {root} or any(
            n.id not in chain and n is not r and any(a in chain | {root} for a in n.args) for n in live):
        return None
    return RowSum(r, steps)


POOLED_WEIGHT = "_kgen_w"   # what the pooled weight's code names the GEMM's own weight


def pool_as_weight(graph: Graph) -> tuple[Graph, list[str]]:
    """AvgPool1d(k, stride s) over the features of a Linear's output, x W^T + b, is the Linear
    of W and b averaged over the same windows of rows: mean_t (x . W_{js+t} + b_{js+t}) =
    x . W'_j + b'_j. A GEMM of N / s rows instead of N (KernelBench 98: a sixteenth), reading W
    once more to average it (W' is computed by torch from the module's parameters on each call,
    as a weight the forward computes is, so autograd takes dW and db back through the means).
    It applies where the pooling's input is the GEMM output or the GEMM output plus a
    per-feature parameter (the bias), nothing else of width N is live (no BatchNorm, no other
    use of z), and it rounds differently (W' rounded once to the module's dtype; the gate
    judges it like any other file). Returns the graph (its GEMM N / s wide: `out_features`
    the pooled width, the bias read pooled: `attrs["pool"]`) and what was applied."""
    pool = graph.pool
    if pool is None or pool.op != "avg":
        return graph, []
    gemm = graph.gemm
    z = graph.node(pool.args[0])
    bias = None
    if z.kind == "pointwise" and z.op == "add" and len(z.args) == 2 and gemm.id in z.args:
        bias = graph.node(z.args[1] if z.args[0] == gemm.id else z.args[0])
        if bias.kind != "param" or bias.level != "col":
            return graph, []
    elif z.id != gemm.id:
        return graph, []
    before = {gemm.id, z.id} | ({bias.id} if bias is not None else set())
    if any(n.level in ("tile", "col") and n.id not in before for n in graph.live()):
        return graph, []   # something else of width N: a BatchNorm, a residual, another use of z
    users = graph.users()
    if users[z.id] != [pool.id] or (bias is not None and (users[gemm.id] != [z.id] or users[bias.id] != [z.id])):
        return graph, []
    kernel, stride = pool.attrs["kernel"], pool.attrs["stride"]
    width = pooled_width(graph.out_features, kernel, stride)
    weight = POOLED_WEIGHT
    body = list(gemm.attrs.get("weight_code") or ())
    if body:   # a weight the forward computes: its value, then its means
        *body, last = body
        body.append(f"{weight} = {last[len('return '):]}")
    else:
        body.append(f"{weight} = {self_attr(gemm.attrs['weight'])}" + (".t()" if gemm.attrs.get("stored_kn") else ""))
    body.append(f"return {window_means_code(weight, kernel, stride)}")
    at = f"line {pool.line}" if pool.line else "the forward"
    nodes: list[Node] = []
    new_id: dict[int, int] = {}
    for old in graph.nodes:
        if old.id == pool.id:
            new_id[old.id] = new_id[z.id]
            continue
        attrs, level = dict(old.attrs), {"pooled": "tile"}.get(old.level, old.level)
        if old.id == gemm.id:
            attrs["weight_code"] = tuple(body)
            attrs["weight_doc"] = (
                f"{'The weight the reference computes' if gemm.attrs.get('weight_code') else gemm.attrs['weight']}"
                f" averaged over the windows of AvgPool1d(kernel_size={kernel},\nstride={stride}) "
                f"({at} of the reference pools the Linear's output: x W'^T is that pooling of x W^T;\n"
                "kgen/ir/rewrite.py, pool_as_weight): each mean summed in fp32 and rounded once.")
            attrs.pop("stored_kn", None)
        elif bias is not None and old.id == bias.id:
            attrs.update(pool=(kernel, stride), shape=(width,))
        n = Node(len(nodes), old.kind, level, tuple(new_id[a] for a in old.args), old.op, attrs,
                 old.line, old.text, old.shape, old.fp32, old.linear_bias)
        nodes.append(n)
        new_id[old.id] = n.id
    rewritten = dataclasses.replace(graph.with_nodes(nodes, new_id[graph.output]), out_features=width)
    what = "x W^T + b" if bias is not None else "x W^T"
    return rewritten, [f"{at}: AvgPool1d(kernel_size={kernel}, stride={stride}) of {what} computed as the "
                       f"Linear of W{' and b' if bias is not None else ''} averaged over those windows "
                       f"of rows ({graph.out_features} -> {width} rows: the GEMM is {width} wide)"]
