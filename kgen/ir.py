"""The epilogue IR: one GEMM feeding a DAG of values over its M x N output.

Every value has a *level*, the shape it broadcasts as against the GEMM output z (M x N):

    tile     (M, N)   z and everything computed element-wise from it
    row      (M, 1)   a row reduction with keepdim=True (sum, mean, max, min over dim 1)
    rowflat  (M,)     the same with keepdim=False
    col      (N,)     a per-feature parameter or buffer ((N,) or (1, N))
    scalar            a constant or a one-element parameter

Node kinds (those of CUTLASS's sm90 epilogue visitors, plus reductions whose result feeds back
into the same output and BatchNorm's column statistics):

    gemm       z = x @ W^T, W the (N, K) matrix at `attrs["weight"]` (a bias is a later `add`)
    param      a parameter or buffer of the module (`attrs["path"]`), col or scalar
    const      a Python number (`attrs["value"]`)
    pointwise  `op` from kgen.ops.POINTWISE on its args (levels combine as torch broadcasts)
    reduce     `op` in REDUCTIONS over dim 1 of a tile value (softmax, log_softmax and
               logsumexp are written with max, sub, exp, sum, log and div when traced)
    batchnorm  BatchNorm1d (`attrs["module"]`) of a tile value: column statistics in training
               mode, running statistics in eval mode, as the module itself decides
    groupnorm  GroupNorm of a tile value (args: the value, then the weight and bias params when
               `attrs["weight"]` / `attrs["bias"]`): statistics of each row's `attrs["groups"]`
               groups of consecutive columns, the same in training and eval mode

`Graph.interpret` runs the graph with torch (each op through its torch oracle in kgen.ops, each
BatchNorm through the module itself), so a traced graph can be checked against the module it
came from, and the lowering's CUDA against the graph.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from . import ops

LEVELS = ("tile", "row", "rowflat", "col", "scalar")
REDUCTIONS = ("sum", "mean", "max", "min")


class Unsupported(ValueError):
    """A module outside the family kgen synthesizes; the message names the op and its line."""


@dataclasses.dataclass
class Node:
    id: int
    kind: str
    level: str
    args: tuple[int, ...] = ()
    op: str = ""
    attrs: dict = dataclasses.field(default_factory=dict)
    line: int | None = None      # line of the reference file the node was traced from
    text: str = ""               # what the reference wrote there (for messages)

    def describe(self) -> str:
        """One line, e.g. `%3 = mul(%1, %2) : tile` or `%2 = gemm.bias : col`."""
        leaf = {"gemm": f"gemm({self.attrs.get('weight')})", "param": self.attrs.get("path", ""),
                "const": repr(self.attrs.get("value"))}
        if self.kind in leaf:
            return f"%{self.id} = {leaf[self.kind]} : {self.level}"
        name = {"batchnorm": f"batchnorm[{self.attrs.get('module')}]"}.get(self.kind) or self.op or self.kind
        attrs = {k: v for k, v in self.attrs.items() if self.kind in ("pointwise", "reduce", "groupnorm")}
        operands = [f"%{a}" for a in self.args] + [f"{k}={v!r}" for k, v in attrs.items()]
        return f"%{self.id} = {name}({', '.join(operands)}) : {self.level}"


def combine_levels(a: str, b: str) -> str | None:
    """The level of a binary op's result, as torch broadcasting gives it; None where the
    broadcast is not an element-wise op over the rows of z ((M,) against (M, N) or (M, 1)
    broadcasts along the wrong axis)."""
    pair = {a, b}
    if "rowflat" in pair:
        return "rowflat" if pair <= {"rowflat", "scalar"} else None
    if "tile" in pair or pair == {"row", "col"}:
        return "tile"
    for level in ("row", "col"):
        if level in pair:
            return level
    return "scalar"


@dataclasses.dataclass(eq=False)  # compared and hashed by identity (lowering caches by graph)
class Graph:
    nodes: list[Node]
    output: int
    in_features: int
    out_features: int

    def node(self, i: int) -> Node:
        return self.nodes[i]

    @property
    def gemm(self) -> Node:
        (g,) = [n for n in self.nodes if n.kind == "gemm"]
        return g

    @property
    def batchnorms(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "batchnorm"]

    @property
    def params(self) -> list[Node]:
        """Parameter and buffer nodes, in first-use order (one node per path)."""
        return [n for n in self.nodes if n.kind == "param"]

    @property
    def reductions(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "reduce"]

    def users(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.args:
                out[a].append(n.id)
        return out

    def live(self) -> list[Node]:
        """The nodes the output depends on, plus every BatchNorm (its buffers are outputs too)."""
        keep: set[int] = set()
        stack = [self.output] + [b.id for b in self.batchnorms]
        while stack:
            i = stack.pop()
            if i not in keep:
                keep.add(i)
                stack.extend(self.nodes[i].args)
        return [n for n in self.nodes if n.id in keep]

    def describe(self) -> str:
        lines = [n.describe() for n in self.live()]
        return "\n".join(lines + [f"return %{self.output}"])

    def output_level(self) -> str:
        return self.nodes[self.output].level

    # ---- the torch oracle ------------------------------------------------------------------
    def interpret(self, x: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
        """The graph's output on x with torch, reading the parameters of `model` (and running
        its BatchNorm modules, which update their buffers as the reference would)."""
        return self.interpret_value(self.output, x, model)

    def interpret_value(self, node: int, x: torch.Tensor, model: torch.nn.Module):
        """The value of `node` (a live one) when the graph runs on x, as `interpret`."""
        values: dict[int, object] = {}
        for n in self.live():
            a = [values[i] for i in n.args]
            if n.kind == "gemm":
                values[n.id] = F.linear(x, model.get_parameter(n.attrs["weight"]))
            elif n.kind == "param":
                values[n.id] = _get_tensor(model, n.attrs["path"])
            elif n.kind == "const":
                values[n.id] = n.attrs["value"]
            elif n.kind == "pointwise":
                values[n.id] = ops.torch_apply(n.op, a, n.attrs)
                if n.level == "rowflat" and values[n.id].dim() == 2:
                    values[n.id] = values[n.id].reshape(-1)  # keepdim=False of a width-1 value
            elif n.kind == "reduce":
                keep = n.level == "row"
                fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[n.op]
                values[n.id] = fn(a[0], dim=1, keepdim=keep)
            elif n.kind == "batchnorm":
                values[n.id] = model.get_submodule(n.attrs["module"])(a[0])
            elif n.kind == "groupnorm":
                weight = a[1] if n.attrs["weight"] else None
                bias = a[1 + n.attrs["weight"]] if n.attrs["bias"] else None
                values[n.id] = F.group_norm(a[0], n.attrs["groups"], weight, bias, n.attrs["eps"])
            else:
                raise AssertionError(n.kind)
        return values[node]


def _get_tensor(model: torch.nn.Module, path: str) -> torch.Tensor:
    module_path, _, name = path.rpartition(".")
    module = model.get_submodule(module_path) if module_path else model
    return getattr(module, name)
