"""The epilogue IR: one GEMM feeding a DAG of values over its M x N output.

Every value has a *level*, the shape it broadcasts as against the GEMM output z (M x N):

    tile     (M, N)   z and everything computed element-wise from it
    row      (M, 1)   a row reduction with keepdim=True (sum, mean, max, min over dim 1)
    rowflat  (M,)     the same with keepdim=False
    pooled   (M, P)   a 1-d pooling over the features of a tile value (P = (N - k) // s + 1
                      columns), or a half of one (P = N / 2: GLU's halves), and everything
                      computed element-wise from it
    col      (N,)     a per-feature parameter or buffer ((N,) or (1, N))
    scalar            a constant or a one-element parameter
    free              a parameter or buffer of any other shape (`attrs["shape"]`)
    full              a value of a shape torch's broadcasting gives when a free parameter meets
                      one of the values above (`Node.shape`, in which "M" is the batch), e.g. an
                      (M, 1) row value plus a (1, N, 1, 1) bias is (1, N, M, 1): the graph's
                      "broadcast tail", computed by its own kernel from one value of the levels
                      above (the tail's "core") and the parameters

Node kinds (those of CUTLASS's sm90 epilogue visitors, plus reductions whose result feeds back
into the same output and BatchNorm's column statistics):

    gemm       z = x @ W^T, W the (N, K) matrix at `attrs["weight"]` (a bias is a later `add`);
               `attrs["stored_kn"]`: the module stores W as (K, N) and writes x @ W (gemm_weight)
    param      a parameter or buffer of the module (`attrs["path"]`), col or scalar; read as the
               means of its windows of `attrs["pool"]` = (kernel, stride) elements where
               rewrite.pool_as_weight made the GEMM's weight such means (window_means)
    const      a Python number (`attrs["value"]`)
    pointwise  `op` from kgen.ir.ops.POINTWISE on its args (levels combine as torch broadcasts)
    reduce     `op` in REDUCTIONS over dim 1 of a tile value (softmax, log_softmax and
               logsumexp are written with max, sub, exp, sum, log and div when traced)
    batchnorm  BatchNorm1d (`attrs["module"]`; `attrs["counts"]` False for F.batch_norm on its
               tensors, which leaves num_batches_tracked alone) of a tile value: column statistics in training
               mode, running statistics in eval mode, as the module itself decides
    groupnorm  GroupNorm of a tile value (args: the value, then the weight and bias params when
               `attrs["weight"]` / `attrs["bias"]`): statistics of each row's `attrs["groups"]`
               groups of consecutive columns, the same in training and eval mode
    pool       `op` (max or avg) over windows of `attrs["kernel"]` consecutive features, every
               `attrs["stride"]` features, of a tile value (MaxPool1d / AvgPool1d of
               x.unsqueeze(1), squeezed back; no padding, floor mode): a pooled value
    half       columns [c P, (c + 1) P) of a tile value, P = N / 2, c = `attrs["half"]` (0 or 1):
               h.chunk(2, -1)[c], F.glu's and nn.GLU's halves, h[:, :P] / h[:, P:], h.split(P, -1)
               (a pooled value: a graph has halves or a pooling, not both, so every pooled
               value has one width)
    mask       an active Dropout's scaled keep mask (tile, `attrs["p"]`, `attrs["module"]`: the
               Dropout module's path, "" for F.dropout): in training mode the tensor
               F.dropout(ones(M, N), p) torch draws, read per element (m, n); in eval mode 1.
               The dropout itself is mul(value, mask), which is what torch computes
               (src * mask * scale with mask in {0, 1}: ones * mask * scale is scale exactly)
    input      the module's input x (full, shape ("M", in_features of the first GEMM)), read
               again after the GEMM (a residual; `attrs["detached"]`: x.detach(), no gradient
               flows to x through it): in a broadcast tail, read per element; or, where a row op,
               a norm or BatchNorm takes a value computed from it and in_features is the part's
               N (`norm(x + fc(x))`), a tile value, read at (m, n) as the mask is. With
               `attrs["index"]` = k >= 1: get_inputs()' tensor k after the input (an extra
               input, `forward(self, x, residual)`), shape ("M", its last dimension), read so too
Operand nodes (param, mask, input) are what the kernels read through EpilogueParams::operand,
each by `attrs["path"]` ("<input>", "<input K>", "<dropout K>" for the last three: no module
attribute).

`Graph.interpret` runs the graph with torch (each op through its torch oracle in kgen.ir.ops, each
BatchNorm through the module itself), so a traced graph can be checked against the module it
came from, and the lowering's CUDA against the graph.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
import re

import torch
import torch.nn.functional as F

from kgen.ir import ops

LEVELS = ("tile", "row", "rowflat", "pooled", "col", "scalar", "free", "full")
TAIL_LEVELS = ("free", "full")
REDUCTIONS = ("sum", "mean", "max", "min")
# Leaves the kernels read through EpilogueParams::operand (the module's tensors and the values
# the emitted forward computes: Dropout's mask, the module's input).
OPERAND_KINDS = ("param", "mask", "input")
INPUT_PATH = "<input>"


def input_path(index: int) -> str:
    """The operand path of the module's input (index 0, INPUT_PATH) or of get_inputs()' tensor
    `index` after it (an extra input: a residual, a gate; `attrs["index"]` of its input node)."""
    return INPUT_PATH if index == 0 else f"<input {index}>"


def input_index(node: "Node") -> int:
    """Which of get_inputs()' tensors an input node reads (0: the module's input)."""
    return node.attrs.get("index", 0)
# BatchNorm's buffers that its training mode updates in place (the kernels' finalize, the op's
# copies of them, which it returns: generator, _KGEN_UPDATED_IN_PLACE; a forward that reads one
# as a value is refused: trace.refuse_running_buffer_reads).
UPDATED_IN_PLACE = ("running_mean", "running_var")


def module_tensor(model, path: str):
    """The parameter or buffer of `model` at `path` (a GEMM's weight may be either), or the
    concatenation of several that a side-by-side path names (side_by_side_path)."""
    parts = side_by_side_parts(path)
    if parts is not None:
        return side_by_side(*(module_tensor(model, p) for p in parts))
    module, _, name = path.rpartition(".")
    return getattr(model.get_submodule(module) if module else model, name)


# Linears of one input side by side (LlamaMLP's gate_proj(x) and up_proj(x)) are one GEMM of their
# weights concatenated (trace.Tracer.side_by_side_gemm): its weight is `SIDE_BY_SIDE(w0, w1)`
# (weight_code, computed from the parameters as the forward runs), their biases one parameter node
# whose path names theirs (side_by_side_path). The emitted file's function of that name caches the
# concatenation for inference (docs/design.md, "Linears side by side"); the oracle's concatenates.
SIDE_BY_SIDE = "_kgen_side_by_side"
_SIDE_BY_SIDE_PATH = re.compile(r"<side by side (.+)>")


def side_by_side(*tensors: torch.Tensor) -> torch.Tensor:
    """The side-by-side Linears' weights (or biases) as one tensor, theirs in order along dim 0."""
    return torch.cat(tensors)


def side_by_side_path(paths) -> str:
    """The operand path of the side-by-side Linears' biases at `paths`, one tensor."""
    return f"<side by side {' '.join(paths)}>"


def side_by_side_parts(path: str) -> list[str] | None:
    """The paths a side-by-side path names, in order (None: an ordinary path)."""
    found = _SIDE_BY_SIDE_PATH.fullmatch(path)
    return found.group(1).split(" ") if found else None


def side_by_side_code(paths, read) -> str:
    """Python for the side-by-side tensors at `paths` as one: SIDE_BY_SIDE of each path's code,
    `read(path)` (self.gate_proj.weight)."""
    return f"{SIDE_BY_SIDE}({', '.join(read(p) for p in paths)})"


def computes_weight(gemm: "Node") -> bool:
    """Whether the forward computes the GEMM's weight from the module's parameters on each call
    (attrs["weight_code"]: F.linear(x, self.weight * self.scale)), a new tensor each time."""
    return bool(gemm.attrs.get("weight_code"))


def stored_weight(model, gemm: "Node") -> bool:
    """Whether the GEMM's weight is a parameter or buffer the model stores (an edit of it changes
    the GEMM's weight: a permutation of its columns, a rounding), not one its forward computes
    (attrs["weight_code"], or a parametrization such as weight_norm's, computed on each access)."""
    if computes_weight(gemm):
        return False
    owner, _, name = gemm.attrs["weight"].rpartition(".")
    module = model.get_submodule(owner) if owner else model
    return name in dict(module.named_parameters(recurse=False)) or name in dict(module.named_buffers(recurse=False))


def weight_method(body: tuple) -> str:
    """The source of the method `_kgen_weight(self)` of a weight the forward computes (a gemm's
    attrs["weight_code"]: the lines of its body)."""
    return "def _kgen_weight(self):\n" + "".join(f"    {line}\n" for line in body)


@functools.lru_cache(maxsize=64)
def _weight_function(body: tuple):
    namespace = {"torch": torch, SIDE_BY_SIDE: side_by_side}
    exec(compile(weight_method(body), "<kgen weight expression>", "exec"), namespace)
    return namespace["_kgen_weight"]


def gemm_weight(model, node: "Node"):
    """The weight of gemm `node` as the GEMM reads it, (N, K): the module's tensor, its
    transpose where the module stores it (K, N) and writes x @ W (attrs["stored_kn"]), or what
    the forward computes from the module's parameters (attrs["weight_code"]: F.linear(x,
    self.weight * self.scale), torch's own ops on them, as the emitted file runs them)."""
    if node.attrs.get("weight_code"):
        return _weight_function(node.attrs["weight_code"])(model)
    w = module_tensor(model, node.attrs["weight"])
    return w.t() if node.attrs.get("stored_kn") else w


def window_means_code(value: str, kernel: int, stride: int) -> str:
    """Python (torch ops on the tensor `value`) for the means of its windows of `kernel`
    consecutive rows, every `stride` rows (no padding, floor mode: AvgPool1d's windows), each
    summed in fp32 (torch's accumulator for every float dtype) and rounded once to the tensor's
    dtype. Windows that do not overlap are a view's middle dimension (its backward an expand);
    overlapping ones torch's unfold (docs/perf.md, session 38: an fp64 sum cost 0.47 ms at 8192 x
    8192, this 0.06-0.10; a slice 0.2 ms more in the backward). The emitted file runs this text and `window_means` evaluates it, so
    the two cannot differ. (An autograd.Function whose backward writes dW with one stack was
    measured and not kept: its apply costs the host more than the nodes it saves, and a 16-bit
    step of KernelBench 98 is the host's time: session 39.)"""
    if kernel == stride:
        # (sliced only where rows are left over: a slice's backward is a zeros and a copy of W)
        whole = f"({value} if {value}.shape[0] % {kernel} == 0 else {value}[:{value}.shape[0] // {kernel} * {kernel}])"
        return f"{whole}.unflatten(0, (-1, {kernel})).mean(1)"
    return f"{value}.unfold(0, {kernel}, {stride}).mean(-1)"


def window_means(t: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    """The rows of t averaged over AvgPool1d's windows (window_means_code)."""
    return eval(window_means_code("t", kernel, stride), {"torch": torch, "t": t})


def pooled_width(n: int, kernel: int, stride: int) -> int:
    """Columns of a 1-d pooling of n features (no padding, floor mode), as torch computes it."""
    return (n - kernel) // stride + 1


def pooled_columns(nodes: list, n: int) -> int:
    """Columns of a pooled value among `nodes` (a graph's, or a trace's so far) after a GEMM of n
    features: its one pooling's, or N / 2 for GLU's halves (a part has one or the other)."""
    pools = [p for p in nodes if p.kind == "pool"]
    if not pools:
        return n // 2
    (pool,) = pools
    return pooled_width(n, pool.attrs["kernel"], pool.attrs["stride"])


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    """torch's broadcasting of two shapes whose dims are ints or "M" (the batch, any size).
    ValueError where torch would refuse, or where a dim would have to equal the batch."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif "M" in (x, y):
            raise ValueError(f"shapes {a} and {b}: a dimension of {x if y == 'M' else y} "
                             "broadcast against the batch")
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return tuple(out[::-1])


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
    shape: tuple = ()            # level full only: the value's shape ("M" is the batch)
    # Whether eager keeps this value in float32 where the module runs in 16 bits: computed after an
    # upcast (a `to_float32` op: x.float() before a softmax or a norm) and before the cast back
    # (`to_module_dtype`). A 16-bit build rounds no such result to the module's dtype
    # (lower.forward: the Emitter, row reductions, tails).
    fp32: bool = False
    # An add of a bias that the GEMM's own call adds (nn.Linear, F.linear(x, W, b), addmm), which
    # torch's GEMM adds before its one rounding to a 16-bit dtype (graph.linear_steps);
    # a bias added by an op of its own (`F.linear(x, W) + b`, `x @ W.t() + b`) is added to the
    # rounded z, as eager rounds twice there.
    linear_bias: bool = False

    def describe(self) -> str:
        """One line, e.g. `%3 = mul(%1, %2) : tile` or `%2 = gemm.bias : col`."""
        # (a computed weight's code, in full: the modes' IRs differ where it does)
        code = "; ".join(self.attrs.get("weight_code") or ())
        leaf = {"gemm": "prologue_input(the module's input)" if self.attrs.get("identity") else
                        f"gemm({self.attrs.get('weight')}{', stored (K, N)' if self.attrs.get('stored_kn') else ''}"
                        f"{' = ' + code if code else ''})", "param": self.attrs.get("path", ""),
                "const": repr(self.attrs.get("value")),
                "mask": f"dropout_mask(p={self.attrs.get('p')!r})",
                "input": "input" + (f"[{self.attrs['index']}]" if self.attrs.get("index") else "")
                         + (".detach()" if self.attrs.get("detached") else "")}
        if self.kind in leaf:
            return f"%{self.id} = {leaf[self.kind]} : {self.level}"
        name = {"batchnorm": f"batchnorm[{self.attrs.get('module')}]",
                "pool": f"{self.op}_pool1d"}.get(self.kind) or self.op or self.kind
        attrs = {k: v for k, v in self.attrs.items() if self.kind in ("pointwise", "reduce", "groupnorm", "pool", "half")}
        operands = [f"%{a}" for a in self.args] + [f"{k}={v!r}" for k, v in attrs.items()]
        shape = f" {shape_text(self.shape)}" if self.level == "full" else ""
        return f"%{self.id} = {name}({', '.join(operands)}) : {self.level}{shape}{' fp32' if self.fp32 else ''}"


# The node kinds whose value is a smooth function of their arguments, and the reductions and pools
# that are (a max or min bends where two elements tie; softmax, traced with a row max, counts as
# one: the checks then look for kinks they will not find, which costs time, not correctness).
SMOOTH_KINDS = frozenset({"input", "param", "const", "mask", "gemm", "batchnorm", "groupnorm", "half"})
SMOOTH_REDUCTIONS = frozenset({"sum", "mean"})
SMOOTH_POOLS = frozenset({"avg"})


def smooth(node: Node) -> bool:
    """Whether the node's value has no kink or jump in its arguments (a kind this module does not
    know: False)."""
    return (node.kind in SMOOTH_KINDS or (node.kind == "pointwise" and ops.smooth(node.op, node.attrs))
            or (node.kind == "reduce" and node.op in SMOOTH_REDUCTIONS)
            or (node.kind == "pool" and node.op in SMOOTH_POOLS))


def combine_levels(a: str, b: str) -> str | None:
    """The level of a binary op's result, as torch broadcasting gives it; None where the
    broadcast is not an element-wise op over the rows of z ((M,) against (M, N) or (M, 1)
    broadcasts along the wrong axis)."""
    pair = {a, b}
    if pair & set(TAIL_LEVELS):
        return "full"          # its shape is broadcast_shapes' (the tracer checks it)
    if "pooled" in pair:   # (M, P): per-feature values of width N do not broadcast onto it
        return "pooled" if pair <= {"pooled", "row", "scalar"} else None
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
    # Active dropouts ({"path", "p", "line", "text", "reproduced"}; trace.Tracer.dropout): the
    # identity in eval mode; in training mode a `mask` node reproduces torch's mask where
    # "reproduced" (a dropout of an (M, N) value), else the emitted forward refuses training mode.
    dropouts: list = dataclasses.field(default_factory=list)
    # How many leading sizes of an input of more dimensions the forward read, traced with them
    # (trace.Tracer.leads; 0: traced on its rows, or a (batch, K) input): its IR is the rows' all
    # the same, the forward's views between the two forms taken as the identity they are.
    leads: int = 0
    # The token the forward selects of a (batch, tokens, features) input before its first GEMM, as
    # it writes the position (0, -1: Reference.token_of, trace.Tracer._on_tokens): the emitted
    # forward takes x.select(1, token); None for any other input.
    token: int | None = None
    # Casts to float32 the forward names ((line, text): x.float(), softmax(dtype=torch.float32)):
    # no-ops in an fp32 module; in a bf16 / fp16 one torch computes on in float32, which kgen's
    # 16-bit build does not, so such a module's file runs fp32 modules only. (line, text, why):
    # another float32 fact of the forward's (nan_to_num's default infinities), with the same effect.
    fp32_casts: list = dataclasses.field(default_factory=list)
    # Model.forward's parameters after the input that get_inputs() leaves at their defaults
    # ((name, default): `def forward(self, x, mask=None)`): traced at those values, and ModelNew's
    # forward takes them too and refuses any other value.
    forward_defaults: list = dataclasses.field(default_factory=list)
    # Model.forward's names for get_inputs()' tensors after the input (`def forward(self,
    # hidden_states, input_tensor)`: ["input_tensor"]; forward(*args): args[1] is "input1"):
    # ModelNew.forward takes them under these names (generator.extra_input_params).
    extra_input_names: list = dataclasses.field(default_factory=list)
    # Model.forward's name for its input (`hidden_states`; None for forward(*args)): ModelNew.forward
    # takes it under this name too (generator.input_params), so a call by keyword works.
    input_name: str | None = None
    # Where the forward reads a feature dimension's size as a number ((line, text): x.size(1),
    # x.shape[-1], math.sqrt(x.size(-1))): the trace baked that number in, so the emitted file
    # runs at the traced in_features and out_features only, and says so for others.
    sizes_read: list = dataclasses.field(default_factory=list)
    # The module's scalar attributes the trace baked into the IR ((dotted path, value):
    # ("multiplier", 2.0), ("gn.num_groups", 8)): the emitted forward refuses a model whose own
    # values differ (trace.hyperparameters_read).
    hyperparameters: list = dataclasses.field(default_factory=list)
    # A hyperparameter inside a module attribute's containers (self.cfg.scale, self.opts["slope"]):
    # its name -> (the module attribute's dotted path, the Python that reads on from it).
    hyperparameter_reads: dict = dataclasses.field(default_factory=dict)
    # The submodules the reference's forward calls, (path, its class as the emitted file names it,
    # or None) in call order (trace._class_source): the emitted forward calls none of them, and refuses to run
    # where one was replaced by another class or given a hook since (generator.submodule_lines).
    called_modules: list = dataclasses.field(default_factory=list)
    # Where the forward calls an op torch defines no derivative for ((line, text): x // c and
    # torch.floor_divide, whose backward raises in torch, where div(rounding_mode='floor') gives
    # zeros): the emitted backward raises too, naming it.
    no_derivative: list = dataclasses.field(default_factory=list)
    # torch's own op on the kernel's output as the module's last step, (method, line, text, args):
    # ("sum", ...) where the forward ends in x.sum() of everything (the kernel gives the rows'
    # sums), ("squeeze", ...) for a squeeze() with no dim (0-d at a batch of 1, as torch's), a
    # view to a shape kgen's values do not take ("reshape", ..., ("M", -1, 4)), x.view(-1),
    # unsqueeze(1) of the output: args in torch's words, "M" the batch). The emitted forward
    # (tail_code) and the oracle (apply_tail) call it; () for none.
    output_tail: tuple = ()
    # The output tail is a sum / mean of everything whose per-row values the kernels keep in
    # float32 (Node.fp32: a to_opmath value), and its result is rounded to the module's dtype once
    # (apply_tail, tail_code's `dtype`), as torch accumulates a 16-bit tensor's every element in
    # float32 and rounds at the end.
    tail_rounds: bool = False
    # The dtype eager gives the module's output inside CUDA's torch.autocast: why it is fp32
    # ("fp32": an op autocast runs in fp32; "param", "input": an op with an fp32 parameter, with
    # the fp32 input, where the module, the input is fp32), () where it is autocast's 16-bit dtype;
    # read from the forward's torch calls (kgen.frontend.autocast); the last part's is the module's.
    autocast_output: tuple = ()
    # Chained GEMMs: the part that computes this part's GEMM input (its output, (M, in_features)),
    # itself a graph of one GEMM and its epilogue. The module's graph is its last part.
    previous: "Graph | None" = None

    def node(self, i: int) -> Node:
        return self.nodes[i]

    @property
    def gemm(self) -> Node:
        (g,) = [n for n in self.nodes if n.kind == "gemm"]
        return g

    @property
    def is_prologue(self) -> bool:
        """Whether this part is a prologue: ops on the module's input before the first GEMM, its
        "GEMM" the identity (trace.Tracer.prologue; docs/design.md, Chained GEMMs)."""
        return bool(self.gemm.attrs.get("identity"))

    @property
    def parts(self) -> list["Graph"]:
        """The chain of GEMM parts, first to last (one part: [self])."""
        return (self.previous.parts if self.previous is not None else []) + [self]

    def with_nodes(self, nodes: list[Node], output: int) -> "Graph":
        """This part with other nodes (a rewrite, a split): the same chain and dropouts."""
        return dataclasses.replace(self, nodes=nodes, output=output)

    @property
    def batchnorms(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "batchnorm"]

    @property
    def params(self) -> list[Node]:
        """Parameter and buffer nodes, in first-use order (one node per path)."""
        return [n for n in self.nodes if n.kind == "param"]

    @property
    def pool(self) -> Node | None:
        """The pooling node (at most one per graph: the tracer refuses a second)."""
        pools = [n for n in self.nodes if n.kind == "pool"]
        return pools[0] if pools else None

    @property
    def halves(self) -> list[Node]:
        """The half nodes (GLU's halves of a tile value), in graph order."""
        return [n for n in self.nodes if n.kind == "half"]

    def pooled_width_code(self) -> str:
        """The columns of a pooled value as an expression in N (C and Python alike: N is
        non-negative, so C's / is Python's //): the pooling's, or N / 2 for halves."""
        pool = self.pool
        if pool is not None:
            return f"(N - {pool.attrs['kernel']}) / {pool.attrs['stride']} + 1"
        return "N / 2"

    def pooled_columns(self, n: int) -> int:
        """pooled_width_code's value at N = n."""
        return pooled_columns(self.nodes, n)

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

    def gradient_reaches(self) -> set[int]:
        """The nodes the output's gradient reaches: what the output depends on other than through
        a detach (x.detach(), softmax's row max, values computed under torch.no_grad()). A leaf
        outside it gets no gradient from the module, None in torch (not zeros)."""
        reach: set[int] = set()
        stack = [self.output]
        while stack:
            i = stack.pop()
            n = self.nodes[i]
            if i in reach or (n.kind == "input" and n.attrs.get("detached")):   # (x.detach(): none)
                continue
            reach.add(i)
            stack.extend(() if n.kind == "pointwise" and n.op == "detach" else n.args)
        return reach

    def describe(self) -> str:
        lines = [n.describe() for n in self.live()]
        return "\n".join(lines + [f"return {self.tail_code(f'%{self.output}')}"])

    def apply_tail(self, out: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """torch's own last op (output_tail) on the kernels' output `out` ("M": its rows); its
        result in `dtype` (the module's) where it rounds (tail_rounds)."""
        if not self.output_tail:
            return out
        method, _, _, args = self.output_tail
        result = getattr(out, method)(*(out.shape[0] if a == "M" else a for a in args))
        return result.to(dtype) if self.tail_rounds and dtype is not None else result

    def tail_code(self, name: str, dtype: str | None = None) -> str:
        """apply_tail as Python on the value named `name`, `dtype` the Python of the module's dtype."""
        if not self.output_tail:
            return name
        method, _, _, args = self.output_tail
        code = f"{name}.{method}({', '.join(f'{name}.shape[0]' if a == 'M' else repr(a) for a in args)})"
        return f"{code}.to({dtype})" if self.tail_rounds and dtype is not None else code

    def output_level(self) -> str:
        return self.nodes[self.output].level

    def level_shape(self, level: str, batch: int) -> tuple[int, ...]:
        """The shape of a value of `level` (tile, row, rowflat or pooled) at this batch."""
        if level == "rowflat":
            return (batch,)
        if level == "col":
            return (self.out_features,)
        if level == "pooled":
            return (batch, self.pooled_columns(self.out_features))
        return (batch, {"tile": self.out_features, "row": 1}[level])

    # ---- the torch oracle ------------------------------------------------------------------
    def interpret(self, x: torch.Tensor, model: torch.nn.Module, *extra_inputs: torch.Tensor) -> torch.Tensor:
        """The graph's output on x (and get_inputs()' tensors after it, `extra_inputs`, as
        model(x, *extra_inputs) takes them) with torch, reading the parameters of `model` (and running
        its BatchNorm modules, which update their buffers as the reference would). A Dropout
        training in `model` draws its mask from torch's generator as the module does, at the
        same point (mask nodes in trace order): seeded alike, the oracle and the module agree."""
        return self.apply_tail(self.interpret_value(self.output, x, model, extra_inputs=extra_inputs), x.dtype)

    def interpret_value(self, node: int, x: torch.Tensor, model: torch.nn.Module, module_input=None,
                        extra_inputs: tuple = ()):
        """The value of `node` (a live one) when the graph runs on x, as `interpret`."""
        module_input = x if module_input is None else module_input
        if self.previous is not None:
            x = self.previous.interpret_value(self.previous.output, x, model, module_input, extra_inputs)
        return self.part_values(x, model, module_input, extra_inputs)[node]

    def part_values(self, x: torch.Tensor, model: torch.nn.Module, module_input=None,
                    extra_inputs: tuple = ()) -> dict:
        """Every live node's value when this part runs on x, its own GEMM's input (the previous
        part's output for a later part of a chain); `module_input`: the module's input (x when
        this is the first part); `extra_inputs`: get_inputs()' tensors after it."""
        values: dict[int, object] = {}
        z32 = None   # a 16-bit module's GEMM output before rounding (below), through the Linear's steps
        steps = linear_steps(self)
        inside_linear, linear_output = frozenset(steps[1:-1]), (steps[-1] if len(steps) > 1 else None)
        for n in self.live():
            a = [values[i] for i in n.args]
            if n.kind == "input":
                if module_input is None and self.previous is not None:
                    raise AssertionError("a later part reads the module's input: pass module_input")
                inp = x if module_input is None else module_input
                if input_index(n):
                    if input_index(n) > len(extra_inputs):
                        raise AssertionError(f"the graph reads get_inputs()' tensor {input_index(n)}: pass extra_inputs")
                    inp = extra_inputs[input_index(n) - 1]
                values[n.id] = inp.detach() if n.attrs["detached"] else inp
                continue
            if n.kind == "mask":
                values[n.id] = dropout_mask(model, n, (x.shape[0], self.out_features), x)
                continue
            if n.kind == "gemm" and n.attrs.get("identity"):
                values[n.id] = x   # (a prologue: the ops on the module's input before its first GEMM)
                continue
            if n.kind == "gemm":
                values[n.id] = F.linear(x, gemm_weight(model, n))
                if x.dtype in (torch.bfloat16, torch.float16):
                    # A 16-bit Linear rounds once, after its bias (the GEMM's fp32 accumulator plus
                    # the bias, as addmm and kgen's kernels do): the add of a parameter right after
                    # the GEMM reads z unrounded.
                    z32 = F.linear(x.float(), gemm_weight(model, n).float())
            elif n.kind == "param":
                # The shape the module reads it as (an order-keeping view: trace.Tracer.param_view).
                value = _get_tensor(model, n.attrs["path"])
                if "pool" in n.attrs:   # a bias averaged as the GEMM's weight is (rewrite.pool_as_weight)
                    value = window_means(value.reshape(-1), *n.attrs["pool"])
                values[n.id] = value.reshape(n.attrs["shape"])
                if n.attrs.get("bool"):   # a condition: 1 and 0 in the module's dtype, as the file hands it
                    values[n.id] = values[n.id].to(x.dtype)
            elif n.kind == "const" and n.level != "scalar":
                # x - x (rewrite.simplify): a constant of a tensor's shape
                values[n.id] = torch.full(self.level_shape(n.level, x.shape[0]), n.attrs["value"],
                                          dtype=x.dtype, device=x.device)
                if "nonfinite" in n.attrs:
                    bad = self.constant_nonfinite(n, x, model)
                    if n.level in ("tile", "row", "pooled"):
                        bad = bad[:, None]
                    elif n.level == "col":
                        bad = bad.any()
                    values[n.id] = values[n.id].masked_fill(bad, n.attrs["nonfinite"])
            elif n.kind == "const":
                value = n.attrs["value"]
                if "nonfinite" in n.attrs and bool(self.constant_nonfinite(n, x, model).any()):
                    value = n.attrs["nonfinite"]
                values[n.id] = value
            elif n.kind == "pointwise" and z32 is not None and (n.id in inside_linear or n.id == linear_output):
                # (the Linear's steps (linear_steps): z scaled by torch.addmm's alpha, then the bias
                # the GEMM's call adds, a parameter or computed from them, F.linear(x, W, self.b *
                # 2), or addmm's beta * b (fp32: Tracer's addmm): computed on the fp32 z, rounded once
                # after the bias, as cuBLAS's epilogue computes alpha * acc + beta * b in fp32)
                wide = [z32 if i in (self.gemm.id, *inside_linear) else v.float() if isinstance(v, torch.Tensor) else v
                        for i, v in zip(n.args, a)]
                z32 = ops.torch_apply(n.op, wide, n.attrs)
                values[n.id] = z32.to(x.dtype)   # (an inner step's: read by no op, only by derivatives)
            elif n.kind == "pointwise" and n.op == "to_module_dtype":
                values[n.id] = a[0].to(x.dtype)   # (back to the module's dtype, as x.to(input.dtype))
            elif n.kind == "pointwise":
                values[n.id] = ops.torch_apply(n.op, a, n.attrs)
                if n.level == "rowflat" and values[n.id].dim() == 2:
                    values[n.id] = values[n.id].reshape(-1)  # keepdim=False of a width-1 value
                elif n.level == "row" and values[n.id].dim() == 1:
                    values[n.id] = values[n.id].reshape(-1, 1)  # a (M,) value unsqueezed
            elif n.kind == "reduce":
                keep = n.level == "row"
                fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[n.op]
                values[n.id] = fn(a[0], dim=1, keepdim=keep)
            elif n.kind == "batchnorm":
                bn = model.get_submodule(n.attrs["module"])
                if n.attrs.get("counts", True):
                    values[n.id] = bn(a[0])
                else:   # F.batch_norm on the module's tensors: num_batches_tracked left alone
                    values[n.id] = F.batch_norm(a[0], bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                                bn.training, bn.momentum, bn.eps)
            elif n.kind == "pool":
                fn = F.max_pool1d if n.op == "max" else F.avg_pool1d
                values[n.id] = fn(a[0].unsqueeze(1), n.attrs["kernel"], n.attrs["stride"]).squeeze(1)
            elif n.kind == "half":
                values[n.id] = a[0].chunk(2, dim=1)[n.attrs["half"]]   # (a view, as torch's chunk)
            elif n.kind == "groupnorm":
                weight = a[1] if n.attrs["weight"] else None
                bias = a[1 + n.attrs["weight"]] if n.attrs["bias"] else None
                if n.attrs.get("affine_fp32"):   # (F.layer_norm(h, ..., self.weight.float(), ...))
                    weight, bias = (None if t is None else t.float() for t in (weight, bias))
                if n.attrs.get("layer"):   # (torch's LayerNorm keeps fp32 statistics in 16 bits)
                    values[n.id] = F.layer_norm(a[0], (a[0].shape[1],), weight, bias, n.attrs["eps"])
                else:
                    values[n.id] = F.group_norm(a[0], n.attrs["groups"], weight, bias, n.attrs["eps"])
            else:
                raise AssertionError(n.kind)
        return values


    def constant_nonfinite(self, n: Node, x: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
        """Per row of x, whether constant `n` (from x - x, rewrite.simplify) is its `nonfinite`
        value there: x's row (when the chain read the GEMM), W or a parameter the chain read
        holds a NaN or an infinity (the kernels' rule, kernels/constant.cuh)."""
        every = [gemm_weight(model, self.gemm)] if n.attrs["reads_gemm"] else []
        every += [_get_tensor(model, path) for path in n.attrs["reads"]]
        anywhere = any(bool((~torch.isfinite(t.detach())).any()) for t in every)
        rows = (~torch.isfinite(x.detach())).any(dim=1) if n.attrs["reads_gemm"] else \
            torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
        return rows | anywhere


def dropout_training(model: torch.nn.Module, module_path: str) -> bool:
    """Whether a dropout draws: its module's mode, or for F.dropout(training=self.training) the
    model's (the emitted forward refuses a model whose modules' modes differ)."""
    return (model.get_submodule(module_path) if module_path else model).training


def dropout_mask(model: torch.nn.Module, node: Node, shape: tuple, like: torch.Tensor):
    """The value of a mask node: in training mode F.dropout of ones, which draws the mask from
    torch's generator exactly as F.dropout of the real value does (the draw depends on the
    generator's state, the shape, dtype, device and p, not on the values: checked on the CPU by
    tests/test_element_operands.py, on the GPU by its gpu tests), and is ones * mask * scale =
    mask * scale; 1 (the identity) in eval mode."""
    if not dropout_training(model, node.attrs["module"]):
        return 1.0
    return F.dropout(torch.ones(shape, dtype=like.dtype, device=like.device), node.attrs["p"], True)


def shape_text(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


# ---- analyses the lowering and the rewrites share -----------------------------------------
def is_per_column(graph: Graph, i: int) -> bool:
    """A value known per column before the GEMM runs: parameters, constants and point-wise ops
    of them."""
    n = graph.node(i)
    return n.level in ("col", "scalar") and n.kind in ("param", "const", "pointwise")


def linear_steps(graph: Graph) -> tuple[int, ...]:
    """The nodes from the GEMM to the Linear's output, which torch's GEMM computes before its one
    rounding to the module's dtype: the GEMM's z, any scalings of it by a number or a per-column
    value (torch.addmm's alpha), then z + bias where the chain's only consumer adds the bias the
    GEMM's own call adds (Node.linear_bias: nn.Linear, F.linear(x, W, b), addmm; a parameter or
    an op on parameters; a one-element bias, nn.Linear(in_features, 1)'s, is scalar-level in the
    IR and counts). A bias computed from parameters, as in F.linear(x, W, self.b * 2), is added
    before torch's rounding too: rounding z first put a bf16 file at 2-4x eager's error against
    fp64, and KernelBench's eval failed it (docs/perf.md, session 57). A bias added by an op of
    its own (`F.linear(x, W) + b`, `x @ W.t() + b`) is not: eager rounds z, then the sum, and
    rounding once put a bf16 file one step from eager where its values are large (randn weights),
    beyond KernelBench's 1e-2 (docs/perf.md, session 59). Without such an add, z alone; () where
    the part has no one GEMM."""
    gemms = [n.id for n in graph.nodes if n.kind == "gemm"]
    if len(gemms) != 1 or graph.nodes[gemms[0]].attrs.get("identity"):
        return ()   # (a prologue's z is the module's input, rounded already)
    steps = [gemms[0]]
    while True:
        users = [n for n in graph.nodes if steps[-1] in n.args]
        if len(users) != 1 or users[0].kind != "pointwise" or len(users[0].args) != 2:
            break
        user = users[0]
        other = [graph.node(a) for a in user.args if a != steps[-1]]
        if len(other) != 1 or other[0].level not in ("col", "scalar"):
            break
        if user.op == "add" and user.linear_bias and is_per_column(graph, other[0].id) and other[0].kind != "const":
            return (*steps, user.id)
        if not (user.op == "mul" or (user.op == "div" and user.args[0] == steps[-1])):
            break
        steps.append(user.id)
    return (gemms[0],)


def affine_chain(graph: Graph, t: int, past_roundings: bool = False) -> tuple[int, list[Node]]:
    """The value t as an affine function of an earlier tile value: t = scale[n] * root +
    shift[n], where the steps from root to t are add, sub, mul, div (by) and neg with per-column
    or scalar operands (a Linear bias, a per-feature scale). Returns root and the steps.
    An upcast (to_float32, to_opmath) on the way is no step: it changes no value, and scale and shift are
    float32 already (a 16-bit module's `fc(x).float().sum(1)` is a row sum of the Linear's output).
    past_roundings: a rounding to the module's dtype (to_module_dtype, after an op computed in
    opmath: add / sub with alpha) is no step either, for a caller that computes its steps in fp32
    unrounded anyway (the matrix-vector rewrite); BatchNorm's fold keeps such a rounding."""
    steps: list[Node] = []
    while True:
        n = graph.node(t)
        if n.kind != "pointwise" or n.level != "tile":
            break
        if n.op in ("to_float32", "to_opmath") or (past_roundings and n.op == "to_module_dtype"):
            t = n.args[0]
            continue
        tiles = [a for a in n.args if graph.node(a).level == "tile"]
        others = [a for a in n.args if a not in tiles]
        if len(tiles) != 1 or not all(is_per_column(graph, a) for a in others):
            break
        if n.op == "neg" or (n.op in ("add", "sub", "mul") and len(n.args) == 2) or \
                (n.op == "div" and n.args[0] == tiles[0]):
            steps.append(n)
            t = tiles[0]
        else:
            break
    return t, steps[::-1]


def self_attr(path: str) -> str:
    """Python that reads the module attribute at `path` (gemm.bias, layers.0.weight, layers.1)
    from the module as `self`: attribute access where every step is an identifier (and no
    keyword), else get_submodule for the module part (an nn.Sequential's children are named 0, 1,
    ...) and getattr for a last name that is none: a ParameterList's parameters are named 0, 1,
    ..., a ParameterDict's by its keys (scale-1), and get_submodule finds modules only. A
    side-by-side path (side_by_side_path) is its tensors concatenated (side_by_side_code)."""
    parts = side_by_side_parts(path)
    if parts is not None:
        return side_by_side_code(parts, self_attr)
    if all(part.isidentifier() and not keyword.iskeyword(part) for part in path.split(".")):
        return f"self.{path}"
    module, _, name = path.rpartition(".")
    owner = f"self.get_submodule({module!r})" if module else "self"
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"{owner}.{name}"
    return f"getattr({owner}, {name!r})"


def _get_tensor(model: torch.nn.Module, path: str) -> torch.Tensor:
    return module_tensor(model, path)
