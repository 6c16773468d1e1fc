"""Backward kernels of a GEMM part, generated from its IR (kernels/backward.cuh runs them).

Two kinds, both ending in the part's own 3xTF32 GEMMs for dx = dz W and dW = dzᵀ x:

1. **Point-wise parts** (GEMM, parameters per feature or of one element, constants and point-wise
   ops): `struct Backward`'s `apply` recomputes the forward values of one element from z, then
   walks the nodes in reverse with each op's VJP from kgen.ir.derivatives, and returns dz and each
   parameter's gradient contribution, which the kernel sums per column in registers.
2. **Staged parts** (row reductions, softmax and logsumexp chains, GroupNorm, BatchNorm in
   training or eval mode): the reverse of the forward's stages.
   - `BackwardRows`, one CTA per row (kernels/backward.cuh, backward_rows_kernel): recompute the
     row's values (its reductions, GroupNorm statistics) from z, then reverse mode in passes, one
     per reduction and per GroupNorm, latest first: a pass recomputes every element's adjoints
     from the seeds known so far (the output's gradient, the reductions already done) and sums
     what reaches the next reduction's row value (or GroupNorm's group sums of ĝ and ĝ x̂). A
     last pass writes the gradient of the boundary value (BatchNorm's output, or z) and each
     parameter's per-element contribution (summed over rows afterwards, in a fixed order).
   - BatchNorm: `BackwardBnSums` gives Σ ȳ and Σ ȳ x̂ per column (dβ and dγ), then
     `BackwardPrefix` computes BatchNorm's input gradient (batch statistics: γ/σ (ȳ − Σȳ/M −
     x̂ Σȳx̂/M); running ones: γ/σ ȳ) and walks the ops before BatchNorm back to z.
   The rules are kgen.ir.autodiff's (the CPU tests check those against torch.autograd).

A broadcast tail (the output broadcast from the stages' core value against the module's input or
parameters of other shapes, forward.split_tail) runs first: `TailBackward` (tail_backward_struct)
sums the output's gradient into the core value's, through the tail's ops reversed, and the kinds
above run from it; then the tail's operands (its parameters, the module's input where the read
is not detached) get theirs the same way.

Every other node kind has no backward kernel yet: `unsupported` names the first one, and the
emitted file's backward() raises with that message.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from kgen.ir import ops
from kgen.ir.derivatives import BACKWARD_NUMBERS_IN_TENSOR_DTYPE, COMPARED_AS_HELD, cuda_vjp
from kgen.ir.graph import Graph, Node, input_index
from kgen.ir.graph import shape_text
from kgen.lower.forward import (REDUCE_BLOCK, REDUCE_INIT, REDUCE_STEP, Emitter, Lowered, TailValues, _block,
                                _group_stats_pass, _loop, bn_input_affine, group_index, live_lines, row_width,
                                split_index, split_tail)

# (A Dropout mask is a per-element operand the backward reads as the forward does.)
POINTWISE_PART_KINDS = ("gemm", "param", "const", "pointwise", "mask")
ELEMENT_LEVELS = ("tile", "col", "scalar")
# Node kinds the staged backward handles (beyond the point-wise ones).
# (The module's input as a tile value: read per element, as the mask; its gradient goes to
# EpilogueParams::d_input.)
STAGED_KINDS = POINTWISE_PART_KINDS + ("reduce", "groupnorm", "batchnorm", "pool", "half", "input")
# The halves whose gradients the row kernel keeps at once, each N / 2 floats of its pooling scratch
# (2 N floats: kernels/backward.cuh): both halves of two values.
MAX_HALVES = 4
KIND_POINTWISE, KIND_STAGED, KIND_GEMV = 1, 2, 3
# Their names in kernels/common.cuh (what the generated CUDA says; 0 is kgen::kBackwardNone).
KIND_NAMES = {0: "kgen::kBackwardNone", KIND_POINTWISE: "kgen::kBackwardPointwise", KIND_STAGED: "kgen::kBackwardStaged",
              KIND_GEMV: "kgen::kBackwardGemv"}
# What a staged part's forward keeps after z per column of a BatchNorm (entry.cuh, kept_floats):
# a, c, x̂'s two coefficients and γ/σ.
KEPT_PER_COLUMN = 5


def kept_per_column(lowered: Lowered) -> int:
    return KEPT_PER_COLUMN if lowered.batchnorm else 0


def _where(n: Node) -> str:
    return f" (line {n.line}: `{n.text}`)" if n.line else ""


def _depends_on(graph: Graph, root: int) -> set[int]:
    """The ids of the nodes computed from node `root` (root included)."""
    out = {root}
    for n in graph.nodes:
        if any(a in out for a in n.args):
            out.add(n.id)
    return out


def boundary(graph: Graph) -> int:
    """Where the row kernel's reverse pass stops: BatchNorm (its backward needs whole columns),
    or z."""
    return graph.batchnorms[0].id if graph.batchnorms else graph.gemm.id


def unsupported(lowered: Lowered) -> str | None:
    """Why this part has no backward (None: it has one), with what to do instead: the emitted
    backward() raises with it."""
    if lowered.traced is not None and lowered.traced.no_derivative:
        line, text = lowered.traced.no_derivative[0]
        return (f"torch defines no derivative for floor_divide (line {line}: `{text}`), so the "
                "reference's backward raises too; torch.div(x, c, rounding_mode='floor') has one (zeros)")
    missing = _missing_kernel(lowered)
    return None if missing is None else f"{missing}; train with the reference module"


def _missing_kernel(lowered: Lowered) -> str | None:
    """The first thing in the part that kgen has no backward kernel for yet (None: none)."""
    if lowered.constant is not None:
        return (None if zero_gradients(lowered) else
                "no backward yet for a broadcast tail after an output that a rewrite made a constant")
    # Dropout's mask is read per element as the forward reads it (the same operand, kept by
    # autograd; nullptr in eval mode): the dropout's mul sends g * mask * scale back. The
    # module's input read after the GEMM is a broadcast tail's (tail_backward_struct), or a tile
    # value the staged kernels read per element, as the mask, and send its gradient to
    # (EpilogueParams::d_input).
    for n in lowered.graph.live():
        if n.kind == "input" and n.level != "tile":
            return f"no backward kernel yet for a read of the module's input outside a broadcast tail{_where(n)}"
    # The kernels send each input read after the GEMM its gradient (EpilogueParams::d_input, one
    # slot per input: the module's and the extra ones, get_inputs()' tensors after it), up to
    # kgen::kMaxInputGradients of them.
    sent = sorted({input_index(n) for n in [*lowered.tail, *lowered.graph.live()]
                   if n.kind == "input" and not n.attrs["detached"]})
    if len(sent) > max_input_gradients():
        named = ", ".join(f"get_inputs()' tensor {k + 1}" if k else "the module's input" for k in sent)
        return (f"no backward kernel yet for the gradients of more than {max_input_gradients()} inputs read "
                f"after the GEMM ({named})")
    width = lowered.traced.out_features if lowered.traced is not None else None
    for n in lowered.tail:
        if n.kind not in ("param", "const", "input", "pointwise"):
            return f"no backward kernel yet for {n.kind} in a broadcast tail{_where(n)}"
        # (A tail parameter's gradient goes into its row of the backward's [P][N] column sums.)
        if n.kind == "param" and _numel(n.attrs["shape"]) > width:
            return (f"no backward kernel yet for a parameter of more than N = {width} elements in a "
                    f"broadcast tail ({n.attrs['path']}, {n.attrs['shape']}){_where(n)}")
    if lowered.gemv:
        return _gemv_missing(lowered)
    graph = lowered.graph
    live = graph.live()
    for n in live:
        if n.kind not in STAGED_KINDS:
            return f"no backward kernel for {n.kind} yet{_where(n)}"
        if n.kind == "reduce" and graph.node(n.args[0]).level not in ("tile", "pooled"):
            return f"no backward kernel for a reduction of a per-row value yet{_where(n)}"
    halves = [n for n in live if n.kind == "half"]
    if len(halves) > MAX_HALVES:
        return f"no backward kernel yet for more than {MAX_HALVES} halves in one part{_where(halves[-1])}"
    from_z = _depends_on(graph, graph.gemm.id)
    b = boundary(graph)
    downstream = _depends_on(graph, b)
    for n in live:
        if n.kind == "pointwise" and n.level in ("row", "rowflat", "pooled"):
            for a in n.args:
                arg = graph.node(a)
                if arg.level in ("col", "scalar") and arg.kind not in ("param", "const"):
                    return f"no backward kernel yet for a computed per-feature value used after a reduction{_where(n)}"
        if b != graph.gemm.id and n.id in downstream and n.id != b:
            for a in n.args:
                if a in from_z and a not in downstream:
                    return ("no backward kernel yet for a value from before BatchNorm used after it"
                            f"{_where(n)}")
        if b != graph.gemm.id and n.id in from_z and n.id not in downstream and n.kind not in POINTWISE_PART_KINDS:
            return f"no backward kernel yet for a {n.kind} before BatchNorm{_where(n)}"
    return None


def zero_gradients(lowered: Lowered) -> bool:
    """Whether every gradient of the part is zero, with no kernel to compute it: its output is a
    constant (rewrite.simplify: x - x, and what follows it) with no broadcast tail after it.
    d(x - x) = 0 for finite x, so torch's gradients are zero too, but where x, W or a parameter
    holds a NaN or an infinity (0 * inf in its chain): those NaN these zeros do not carry."""
    return lowered.constant is not None and not lowered.tail


def has_kernels(lowered: Lowered) -> bool:
    """Whether the part's backward runs kernels (kernels/backward.cuh, gemv_backward.cuh): it has
    a backward, and its gradients are not all zero."""
    return unsupported(lowered) is None and not zero_gradients(lowered)


def kind(lowered: Lowered) -> int:
    """KIND_POINTWISE, KIND_STAGED or KIND_GEMV (for a supported part); 0 (none) for a part whose
    gradients are all zero (zero_gradients: no kernels)."""
    if zero_gradients(lowered):
        return 0
    if lowered.gemv:
        return KIND_GEMV
    live = lowered.graph.live()
    if all(n.kind in POINTWISE_PART_KINDS and n.level in ELEMENT_LEVELS for n in live):
        return KIND_POINTWISE
    return KIND_STAGED


def operand_index(lowered: Lowered) -> dict[str, int]:
    return {n.attrs["path"]: k for k, n in enumerate(lowered.operands)}


ROUNDED_TO_MODULE = "kgen::rounded_to_module<kgen_operand_t>"


def _vjp(graph: Graph, n: Node, g: str, y: str, operands: list[str]) -> tuple:
    """Point-wise node n's CUDA VJP from its gradient g, its recomputed result y and operands. The
    recomputation rounds nothing to a 16-bit module's dtype; an op of COMPARED_AS_HELD compares
    its operands (and result) rounded to it, as the forward held them, and its numbers rounded
    where eager's backward compares them in the tensor's dtype (BACKWARD_NUMBERS_IN_TENSOR_DTYPE),
    as the forward does (lower.forward._cuda_expr), unless the compared values are fp32 (an
    upcast's). ROUNDED_TO_MODULE is the identity in fp32 builds and the build for autocast."""
    if n.op not in COMPARED_AS_HELD:
        return cuda_vjp(n.op, g, y, operands, n.attrs)
    compared = [graph.node(a) for a in n.args[:2]] if n.op == "where" else [n]
    if any(c.fp32 for c in compared):
        return cuda_vjp(n.op, g, y, operands, n.attrs)
    numbers = n.op in BACKWARD_NUMBERS_IN_TENSOR_DTYPE
    held = [f"{ROUNDED_TO_MODULE}({o})" if graph.node(a).kind != "const" or numbers else o
            for a, o in zip(n.args, operands)]
    y = y if y is None else f"{ROUNDED_TO_MODULE}({y})"
    return cuda_vjp(n.op, g, y, held, n.attrs, ROUNDED_TO_MODULE if numbers else None)


def _elementwise_vjp(graph: Graph, nodes: list[Node], top: int, seed: str, value: dict) -> tuple[list[str], dict]:
    """Reverse mode over the element-level `nodes` (in graph order) from `top`, whose gradient
    is the C expression `seed`: the statements, and each node's adjoint variable."""
    adjoint = {n.id: f"d{n.id}" for n in nodes if n.kind not in ("const", "mask")}  # (a mask takes none)
    lines = [f"float {adjoint[n.id]} = {seed if n.id == top else '0.0f'};" for n in nodes if n.id in adjoint]
    for n in reversed(nodes):
        if n.kind != "pointwise" or n.id not in adjoint:
            continue
        grads = _vjp(graph, n, adjoint[n.id], value[n.id], [value[a] for a in n.args])
        for a, grad in zip(n.args, grads):
            if grad is not None and a in adjoint:
                lines.append(f"{adjoint[a]} += {grad};")
    return lines, adjoint


def _scalar_flags(lowered: Lowered) -> str:
    return ", ".join("true" if n.level == "scalar" else "false" for n in lowered.operands) or "false"


def backward_struct(lowered: Lowered) -> str:
    """The part's backward structs (see the module docstring); `lowered` must be supported."""
    if kind(lowered) == KIND_STAGED:
        return _staged_structs(lowered)
    if kind(lowered) == KIND_GEMV:
        return _gemv_structs(lowered)
    graph = lowered.graph
    operands = operand_index(lowered)
    live = graph.live()
    forward = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready=True, element=True, module_rounding=False)
    value = {n.id: forward.get(n.id) for n in live}
    reverse, adjoint = _elementwise_vjp(graph, live, graph.output, "g", value)
    lines = list(forward.lines) + reverse
    # A point-wise part has no tail, so its operands are its live parameters and Dropout's
    # masks (drawn, not learned: their slot's contribution is 0, and no gradient is returned for
    # them, operand_gradients): every c[k] is written.
    params = [n for n in live if n.kind == "param"]
    masks = [n for n in live if n.kind == "mask"]
    # Operands read by a broadcast tail alone (its parameters, the module's input) get their
    # gradients from TailBackward: none here.
    rest = sorted(set(range(len(lowered.operands))) - {operands[n.attrs["path"]] for n in params + masks})
    assert all(n.kind != "mask" for n in lowered.operands if operands[n.attrs["path"]] in rest)
    lines += [f"c[{operands[n.attrs['path']]}] = {adjoint[n.id]};" for n in params]
    lines += [f"c[{operands[n.attrs['path']]}] = 0.0f;  // Dropout's mask: no gradient" for n in masks]
    lines += [f"c[{k}] = 0.0f;  // read by the broadcast tail alone" for k in rest]
    body = "\n".join(f"    {line}" for line in lines)
    return f"""// The backward of the epilogue (kgen/lower/backward.py): dz of one element from z and g = dL/dout,
// and each parameter's gradient contribution c[k] (summed over rows; over all elements for a
// one-element parameter, kScalar[k]).
struct Backward {{
  static constexpr int kKind = {KIND_NAMES[KIND_POINTWISE]};
  static constexpr int kParams = {len(lowered.operands)};
  static constexpr bool kScalar[{max(1, len(lowered.operands))}] = {{{_scalar_flags(lowered)}}};
  __device__ static __forceinline__ float apply(float z, float g, int m, int n, const kgen::EpilogueParams& p,
                                                float* c) {{
    (void)m; (void)n; (void)p; (void)c;
{body}
    return {adjoint[graph.gemm.id]};
  }}
}};"""


def _element_struct(name: str, comment: str, params: int, lines: list[str], result: str) -> str:
    body = "".join(f"\n    {line}" for line in live_lines(lines, result))
    return f"""{comment}
struct {name} {{
  __device__ static __forceinline__ float apply(float z, float g, int m, int n, const kgen::EpilogueParams& p,
                                                float* c) {{
    (void)z; (void)g; (void)m; (void)n; (void)p; (void)c;
    for (int k = 0; k < {max(1, params)}; ++k) c[k] = 0.0f;{body}
    return {result};
  }}
}};"""


def _batchnorm_structs(lowered: Lowered) -> list[str]:
    """BackwardBnSums and BackwardPrefix (see the module docstring) for a part with BatchNorm."""
    graph = lowered.graph
    operands = operand_index(lowered)
    (bn,) = graph.batchnorms
    root, _ = bn_input_affine(graph, bn)
    t = bn.args[0]
    downstream = _depends_on(graph, bn.id)
    def xhat_of(e: Emitter) -> str:
        return f"const float xhat = fmaf(p.bn_xa[n], {e.get(root)}, p.bn_xc[n]);"

    forward = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready=True, element=True, module_rounding=False)
    xhat = xhat_of(forward)
    sums = _element_struct(
        "BackwardBnSums", f"// BatchNorm (line {bn.line}): c[0] = g, c[1] = g * x̂ of one element, g the gradient of\n"
        "// its output; summed over the batch they are dβ and dγ.", 2,
        [*forward.lines, xhat, "c[0] = g;", "c[1] = g * xhat;"], "0.0f")
    prefix_nodes = [n for n in graph.live() if n.id not in downstream]
    forward = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready=True, element=True, module_rounding=False)
    value = {n.id: forward.get(n.id) for n in prefix_nodes}
    xhat = xhat_of(forward)
    dt = ("p.bn_gi[n] * (p.bn_training ? g - p.bn_sum_y[n] * p.inv_batch - xhat * (p.bn_sum_yx[n] * p.inv_batch) "
          ": g)")
    head = [*forward.lines, xhat]
    reverse, adjoint = _elementwise_vjp(graph, prefix_nodes, t, dt, value)
    params = [n for n in prefix_nodes if n.kind == "param"]
    tail = [f"c[{operands[n.attrs['path']]}] = {adjoint[n.id]};" for n in params]
    tail += [_input_gradient_line(n, adjoint[n.id], lowered) for n in prefix_nodes if n.kind == "input"]
    prefix = _element_struct(
        "BackwardPrefix", "// BatchNorm's input gradient from g, the gradient of its output (batch statistics or running\n"
        "// ones), then the ops before BatchNorm in reverse, to dz; c[k]: parameter k's contributions.",
        len(lowered.operands), head + reverse + tail, adjoint[graph.gemm.id])
    return [sums, prefix]


class _RowReverse:
    """The body of BackwardRows::row (see the module docstring): statements over one row, with
    `row` the row of z (shared memory or global), `grow` the row of the output's gradient,
    `dst` the row of the boundary value's gradient and `contrib` the row of the first
    contribution plane (plane k at contrib + k * plane), which the row's contributions are
    added to (the row kernel adds several rows into one plane row: kernels/backward.cuh)."""

    def __init__(self, lowered: Lowered):
        self.lowered = lowered
        self.graph = graph = lowered.graph
        self.operands = operand_index(lowered)
        self.b = boundary(graph)
        down = _depends_on(graph, self.b) - {self.b}
        from_z = _depends_on(graph, graph.gemm.id)
        live = graph.live()
        self.live = live
        # Element-level nodes whose adjoints the row kernel computes: everything after the
        # boundary, and values computed from parameters alone (their uses after it).
        self.element = [n for n in live if (n.kind == "pointwise" and n.level in ELEMENT_LEVELS
                                            and (n.id in down or n.id not in from_z))
                        or (n.kind == "groupnorm") or n.id == self.b]
        self.element_ids = {n.id for n in self.element}
        self.row_nodes = [n for n in live if n.level in ("row", "rowflat") and n.kind != "const"]
        # Nodes a gradient reaches from the output (not through detach: softmax's and
        # logsumexp's row max, trace.py): only their reductions need a pass.
        active = graph.gradient_reaches()
        self.barriers = [n for n in live if n.kind in ("reduce", "groupnorm", "pool", "half") and n.id in active]
        # Row values whose gradient goes somewhere (not a detach, and reached from the output).
        self.row_collected = [n for n in self.row_nodes if n.id in active
                              and not (n.kind == "pointwise" and n.op == "detach")]
        # Pooled values (per pooled column j): the pooling or the halves, and the point-wise ops after them.
        self.pooled = [n for n in live if n.kind in ("pool", "half") or (n.kind == "pointwise" and n.level == "pooled")]
        # Each half's place in the pooling scratch: its gradient at pooled column j is pool[slot * N / 2 + j].
        self.half_slot = {n.id: k for k, n in enumerate(n for n in live if n.kind == "half")}
        self.params = [n for n in live if n.kind == "param"
                       and any(u in down or u not in from_z for u in self._users(n.id))]
        self.slots = {n.attrs["path"]: k for k, n in enumerate(self.params)}
        self.rows: dict[int, str] = {}      # row values
        # Per-row values (row ops, one-element parameters) declared once in the function's scope.
        self._row_emitter = Emitter(graph, self.operands, {}, bn_ready=True, element=False, module_rounding=False)
        self.groups: dict[int, str] = {}    # GroupNorm node -> statistics array
        self.counts: dict[int, str] = {}    # max / min reduction -> number of ties
        # Which reduction's pass collects each row value's gradient: the latest reduction with a
        # pass (one a gradient reaches) at or before it in graph order. Every use of the row value
        # comes after it, so the passes run before that one (of the reductions after it) have
        # resolved all the seeds its uses need. None: no such reduction (a row value of a detached
        # max alone): a pass of its own after every reduction's.
        reductions = [n.id for n in self.barriers if n.kind == "reduce"]
        self.collected_by: dict[int, int | None] = {
            q.id: max((r for r in reductions if r <= q.id), default=None) for q in self.row_nodes}

    def _users(self, i: int) -> list[int]:
        return [n.id for n in self.live if i in n.args]

    def row_value(self, i: int, out: list[str]) -> str:
        """Row value i's name in the row function's scope (declared into `out` on first use)."""
        e = self._row_emitter
        e.names.update(self.rows)
        before = len(e.lines)
        name = e.get(i)
        out.extend(e.lines[before:])
        return name

    def pooled_emitter(self) -> Emitter:
        """Per pooled column j: the row values, and z's row inside a pooling window."""
        e = Emitter(self.graph, self.operands, dict(self.rows), bn_ready=True, element=False, module_rounding=False)
        e.group_stats = self.groups
        e.window_available = {self.graph.gemm.id: "s", **self.rows}
        return e

    def emitter(self, element: bool = True) -> Emitter:
        available = {self.graph.gemm.id: "s", **self.rows} if element else dict(self.rows)
        e = Emitter(self.graph, self.operands, available, bn_ready=True, element=element, module_rounding=False)
        e.group_stats = self.groups
        return e

    def forward(self) -> list[str]:
        """The row's values: each reduction (and the number of elements equal to a max or min)
        and each GroupNorm's statistics, as the forward pass computes them."""
        out = []
        for n in self.live:
            if n.kind == "groupnorm":
                def emit(n=n):
                    e = self.emitter()
                    return e, e.get(n.args[0])
                self.groups[n.id] = f"g{n.id}"
                out += _group_stats_pass(n, self.groups[n.id], emit, self.graph.out_features, at_traced_width=False,
                                         pow2_products=False)
            elif n.kind == "reduce":
                level = self.graph.node(n.args[0]).level      # tile, or pooled
                emitter = self.pooled_emitter if level == "pooled" else self.emitter
                e = emitter()
                v = e.get(n.args[0])
                acc = f"r{n.id}"
                out.append(f"float {acc} = {REDUCE_INIT[n.op]};  // {n.op} over the row, line {n.line}")
                out += _loop(self.graph, level, [*e.lines, REDUCE_STEP[n.op].format(acc=acc, v=v)])
                out.append(f"{acc} = {REDUCE_BLOCK[n.op]}({acc}, scratch);")
                if n.op == "mean":
                    out.append(f"{acc} /= static_cast<float>({row_width(self.graph, level)});")
                if n.op in ("max", "min") and n in self.barriers:
                    e = emitter()
                    v = e.get(n.args[0])
                    count = self.counts[n.id] = f"ties{n.id}"
                    out.append(f"float {count} = 0.f;  // elements equal to the {n.op} (they share its gradient)")
                    out += _loop(self.graph, level, [*e.lines, f"{count} += ({v}) == {acc} ? 1.f : 0.f;"])
                    out.append(f"{count} = kgen::block_sum({count}, scratch);")
                self.rows[n.id] = acc
            elif n.level in ("row", "rowflat") and n.kind != "const":
                self.rows[n.id] = self.row_value(n.id, out)
        return out

    def element_pass(self, resolved: set[int], collect: set[int], final: bool, space: str = "tile"):
        """One element's adjoints from the seeds known so far (the output's gradient, the
        reductions, GroupNorms and pooling in `resolved`): adds what reaches the row values in
        `collect` to c<id>, and, when `final`, each parameter's contribution to cp<slot>.
        `space`: "tile", per column n of z (in a loop that defines n and s = row[n]), or
        "pooled", per pooled column j (in a loop over j: the pooled values and their adjoints).
        Returns the statements, each element node's adjoint variable and the values' names."""
        graph = self.graph
        pooled = space == "pooled"
        e = self.pooled_emitter() if pooled else self.emitter()
        nodes = self.pooled if pooled else self.element
        value = {}
        for n in nodes:
            value[n.id] = e.get(n.id)

        def val(i: int) -> str:
            return value[i] if i in value else e.get(i)

        args = {n.id: [val(a) for a in n.args] for n in nodes if n.kind == "pointwise"}
        lines = list(e.lines)
        adjoint = {n.id: f"d{n.id}" for n in nodes}
        out = graph.output
        seed = "kgen::as_float(grow[j])" if pooled else "kgen::as_float(grow[n])"
        lines += [f"float {adjoint[n.id]} = {seed if n.id == out else '0.0f'};" for n in nodes]
        reads = [n for n in self.live if n.kind == "input"]   # the module's input, per element
        if final:
            lines += [f"float cp{k} = 0.0f;" for k in range(len(self.params))]
            lines += [f"float din{n.id} = 0.0f;" for n in reads]

        def send(a: int, grad: str):
            node = graph.node(a)
            if a in adjoint:
                lines.append(f"{adjoint[a]} += {grad};")
            elif node.kind == "param":
                if final:
                    lines.append(f"cp{self.slots[node.attrs['path']]} += {grad};")
            elif node.kind == "input":
                if final:
                    lines.append(f"din{a} += {grad};")
            elif a in collect:
                lines.append(f"c{a} += {grad};")

        for n in reversed(self.live):
            if n.kind == "pointwise" and n.id in adjoint:
                grads = _vjp(self.graph, n, adjoint[n.id], value[n.id], args[n.id])
                for a, grad in zip(n.args, grads):
                    if grad is not None:
                        send(a, grad)
            elif n.kind == "reduce" and n.id in resolved and n.args[0] in adjoint:
                u = n.args[0]
                width = row_width(graph, graph.node(u).level)
                if n.op in ("max", "min"):
                    seed = f"(({val(u)}) == r{n.id} ? a{n.id} / {self.counts[n.id]} : 0.0f)"
                else:
                    seed = {"sum": f"a{n.id}", "mean": f"a{n.id} / static_cast<float>({width})"}[n.op]
                send(u, seed)
            elif n.kind == "groupnorm" and n.id in resolved and n.id in adjoint:
                lines.append(self._group_norm_xhat(n, val))
                self._group_norm_vjp(n, val, send)
            elif n.kind == "pool" and n.id in resolved and n.args[0] in adjoint:
                lines.extend(self._pool_seed(n))
                send(n.args[0], f"pseed{n.id}")
            elif n.kind == "half" and n.id in resolved and n.args[0] in adjoint:
                send(n.args[0], self._half_seed(n))
        return lines, adjoint, val

    def _half_seed(self, half: Node) -> str:
        """The gradient a half sends to its input at column n: its own at pooled column n - c N / 2
        (kept in `pool` by the halves' pass) on its columns, 0 on the other half's."""
        width = row_width(self.graph, "pooled")
        at = f"pool[{self.half_slot[half.id]} * ({width}) + n{' - (' + width + ')' if half.attrs['half'] else ''}]"
        inside = f"n >= ({width})" if half.attrs["half"] else f"n < ({width})"
        return f"({inside} ? {at} : 0.0f)"

    def _halves_pass(self, halves: list[Node], resolved: set[int], final: bool) -> list[str]:
        """The pass of `halves` (consecutive among the row's barriers: their gradients complete
        together), over the pooled columns j: each one's gradient into its slot of pool[];
        `final` (the pass of the first halves in graph order, after which every pooled op's
        adjoint is complete): the one-element parameters' contributions of the pooled ops into
        rowc<slot>, once."""
        lines, adjoint, _ = self.element_pass(resolved, set(), final=final, space="pooled")
        width = row_width(self.graph, "pooled")
        body = list(lines) + [f"pool[{self.half_slot[h.id]} * ({width}) + j] = {adjoint[h.id]};  "
                              f"// half {h.attrs['half']}, line {h.line}" for h in halves]
        scalars = [k for k, n in enumerate(self.params) if n.level == "scalar"] if final else []
        body += [f"pc{k} += cp{k};" for k in scalars]
        return [*(f"float pc{k} = 0.0f;" for k in scalars),
                *_loop(self.graph, "pooled", body),
                *(f"rowc{k} += kgen::block_sum(pc{k}, scratch);" for k in scalars),
                "__syncthreads();  // pool[] is read by other threads next"]

    def _pool_seed(self, pool: Node) -> list[str]:
        """The gradient pooling sends to its input at column n: over the windows j holding n,
        the pooled gradient (kept in `pool` by the pooling's pass) to the window's first maximum
        (max, torch's index), or a k-th of it to each tap (avg)."""
        k, stride = pool.attrs["kernel"], pool.attrs["stride"]
        width = row_width(self.graph, "pooled")
        take = ("(j * {s} + static_cast<int>(pool[{w} + j]) == n ? pool[j] : 0.0f)" if pool.op == "max"
                else "pool[j] / {k}").format(s=stride, w=f"({width})", k=ops.cuda_float(k))
        return [
            f"float pseed{pool.id} = 0.0f;  // {pool.op} pooling, line {pool.line}: the windows holding n",
            *_block(f"for (int j = n >= {k - 1} ? (n - {k - 1} + {stride - 1}) / {stride} : 0; "
                    f"j <= n / {stride} && j < {width}; ++j)", [f"pseed{pool.id} += {take};"]),
        ]

    def _pool_pass(self, pool: Node, resolved: set[int]) -> list[str]:
        """The pooling's pass, over the pooled columns j: each one's gradient (complete: every
        pooled op after it is resolved) into pool[j] and, for max, its window's first maximum
        into pool[P + j]; the one-element parameters' contributions of the pooled ops into
        rowc<slot>."""
        lines, adjoint, _ = self.element_pass(resolved, set(), final=True, space="pooled")
        width = row_width(self.graph, "pooled")
        body = list(lines) + [f"pool[j] = {adjoint[pool.id]};"]
        if pool.op == "max":
            inner = self.emitter()
            v = inner.get(pool.args[0])
            body += ["float best = -INFINITY;", "int first = 0;",
                     *_block(f"for (int tap = 0; tap < {pool.attrs['kernel']}; ++tap)", [
                         f"const int n = j * {pool.attrs['stride']} + tap;", "const float s = row[n];",
                         *inner.lines,
                         # the first maximum, and the first NaN once there is one (torch's index)
                         f"if (best == best && (({v}) > best || ({v}) != ({v}))) {{ best = {v}; first = tap; }}"]),
                     f"pool[({width}) + j] = static_cast<float>(first);"]
        scalars = [k for k, n in enumerate(self.params) if n.level == "scalar"]
        body += [f"pc{k} += cp{k};" for k in scalars]
        return [*(f"float pc{k} = 0.0f;" for k in scalars),
                *_loop(self.graph, "pooled", body),
                *(f"rowc{k} += kgen::block_sum(pc{k}, scratch);" for k in scalars),
                "__syncthreads();  // pool[] is read by other threads next"]

    def _group_norm_parts(self, n: Node, val) -> tuple[str, str, str, str]:
        """(group index, the weight at n, x̂ at n, 1/σ of the group) of GroupNorm n at column n."""
        stats = self.groups[n.id]
        group = group_index(n)
        weight = val(n.args[1]) if n.attrs["weight"] else "1.0f"
        rstd = f"{stats}[2 * {group} + 1]"
        xhat = f"(({val(n.args[0])}) - {stats}[2 * {group}]) * {rstd}"
        return group, weight, xhat, rstd

    def _group_norm_xhat(self, n: Node, val) -> str:
        return f"const float xh{n.id} = {self._group_norm_parts(n, val)[2]};"

    def _group_norm_vjp(self, n: Node, val, send) -> None:
        """GroupNorm n's VJP at one element (its group sums known): to its input, and (`send`
        passes them on in the final pass) to its weight and bias."""
        group, weight, _, rstd = self._group_norm_parts(n, val)
        sums = f"gs{n.id}"
        size = f"static_cast<float>(N / {n.attrs['groups']})"
        send(n.args[0], f"{rstd} * (d{n.id} * {weight} - {sums}[2 * {group}] / {size} - xh{n.id} * "
                        f"{sums}[2 * {group} + 1] / {size})")
        params = list(n.args[1:])
        if n.attrs["weight"]:
            send(params.pop(0), f"d{n.id} * xh{n.id}")
        if n.attrs["bias"]:
            send(params.pop(0), f"d{n.id}")

    def _group_sums(self, gn: Node, resolved: set[int]) -> list[str]:
        """GroupNorm gn's per-group sums of ĝ = γ ȳ and ĝ x̂ (ȳ the gradient of its output, complete
        once the passes of everything after it are done) into gs<id>: one warp per group, its
        lanes striding the group's columns (a fixed order: deterministic)."""
        lines, _, val = self.element_pass(resolved, set(), final=False)
        _, weight, xhat, _ = self._group_norm_parts(gn, val)
        groups = gn.attrs["groups"]
        return [
            f"__shared__ float gs{gn.id}[2 * {groups}];  // GroupNorm, line {gn.line}: (Σ ĝ, Σ ĝ x̂) per group",
            *_block("", [
                f"const int size = N / {groups}, lane = threadIdx.x % 32;",
                *_block(f"for (int grp = threadIdx.x / 32; grp < {groups}; grp += blockDim.x / 32)", [
                    "float s1 = 0.f, s2 = 0.f;",
                    *_block("for (int n = grp * size + lane; n < (grp + 1) * size; n += 32)", [
                        "const float s = row[n];", *lines,
                        f"const float gh = d{gn.id} * {weight};", "s1 += gh;", f"s2 = fmaf(gh, {xhat}, s2);"]),
                    "s1 = kgen::warp_sum(s1);", "s2 = kgen::warp_sum(s2);",
                    *_block("if (lane == 0)", [f"gs{gn.id}[2 * grp] = s1;", f"gs{gn.id}[2 * grp + 1] = s2;"]),
                ]),
                "__syncthreads();",
            ]),
        ]

    def _collect(self, completed: list[Node], resolved: set[int]) -> list[str]:
        """The row values `completed` (their uses resolved): their gradients, summed over the
        elements that use them (columns of z, pooled columns), then the row-level ops among
        them in reverse, passing gradients on to their row-level arguments."""
        graph, out = self.graph, []
        ids = {q.id for q in completed}
        for space in ("tile", "pooled") if self.pooled else ("tile",):
            lines, _, _ = self.element_pass(resolved, ids, final=False, space=space)
            # Only row values that elements use get sums (a logsumexp output has none).
            summed = [q for q in completed if any(line.startswith(f"c{q.id} += ") for line in lines)]
            if summed:
                out += _block("", [*(f"float c{q.id} = 0.0f;" for q in summed), *_loop(graph, space, lines),
                                   *(f"a{q.id} += kgen::block_sum(c{q.id}, scratch);" for q in summed)])
        for q in reversed(completed):
            if q.kind != "pointwise":
                continue
            operands = [self.row_value(a, out) for a in q.args]
            grads = _vjp(graph, q, f"a{q.id}", self.rows[q.id], operands)
            for a, grad in zip(q.args, grads):
                node = graph.node(a)
                if grad is None or node.kind == "const":
                    continue
                if node.kind == "param":
                    out.append(f"rowc{self.slots[node.attrs['path']]} += {grad};")
                else:
                    out.append(f"a{a} += {grad};")
        return out

    def body(self) -> str:
        graph = self.graph
        out = ["const float* row = zrow;  // the row of z (then its copy in shared memory)",
               *_block("if (cache != nullptr)", [
                   # (one load at a time: kgen::copy_row's four in flight spilled a register here)
                   "for (int n = threadIdx.x; n < N; n += blockDim.x) cache[n] = zrow[n];",
                   "__syncthreads();", "row = cache;"])]
        out += self.forward()
        out += [f"float a{q.id} = {'kgen::as_float(grow[0])' if q.id == graph.output else '0.0f'};  // the row value's gradient"
                for q in self.row_nodes]
        rowc = [n for n in self.params if n.level == "scalar"]
        out += [f"float rowc{self.slots[n.attrs['path']]} = 0.0f;  // per-row uses of a one-element parameter"
                for n in rowc]
        resolved: set[int] = set()
        first_half = next((x for x in self.barriers if x.kind == "half"), None)
        run: list[Node] = []   # consecutive halves (reversed), one pass for them all
        for k, x in enumerate(reversed(self.barriers)):
            if x.kind == "half":
                run.insert(0, x)
                before = self.barriers[len(self.barriers) - 2 - k] if k + 1 < len(self.barriers) else None
                if before is None or before.kind != "half":
                    out += self._halves_pass(run, resolved, final=run[0] is first_half)
                    resolved.update(h.id for h in run)
                    run = []
                continue
            if x.kind == "reduce":
                out += self._collect([q for q in self.row_collected if self.collected_by[q.id] == x.id], resolved)
            elif x.kind == "pool":
                out += self._pool_pass(x, resolved)
            else:
                out += self._group_sums(x, resolved)
            resolved.add(x.id)
        out += self._collect([q for q in self.row_collected if self.collected_by[q.id] is None], resolved)
        lines, adjoint, _ = self.element_pass(resolved, set(), final=True)
        lines.append(f"kgen::store_as(dst + n, {adjoint[self.b]});")
        lines += [_input_gradient_line(n, f"din{n.id}", self.lowered) for n in self.live if n.kind == "input"]
        for k, n in enumerate(self.params):
            extra = f" + (n == 0 ? rowc{k} : 0.0f)" if n.level == "scalar" else ""
            lines.append(f"contrib[{k} * plane + n] += cp{k}{extra};")
        out += _loop(graph, "tile", lines)
        return "\n".join(f"    {line}" for line in drop_unused_values(out))


# A statement that declares a float from an expression: `float a = ...;`, `const float v = ...;`.
_DECLARATION = re.compile(r"^\s*(?:const\s+)?float\s+(\w+)\s*=\s*(.*);\s*(?://.*)?$")
# What a declaration's expression must not hold to be dropped with it: block-wide reductions
# (every thread of the block must reach their barriers), writes.
_EFFECTS = ("block_", "atomic", "__sync", "scratch", "++", "--", "+=", "-=", "*=", "/=")


def drop_unused_values(lines: list[str]) -> list[str]:
    """`lines` without the declarations of values that nothing reads (the reverse pass recomputes
    every forward value of an element, and declares every row value's gradient, where only some
    are used: a softmax's output, whose derivative is written with its inputs; a detached
    max's). nvcc drops them as well (the machine code is the same) but warns (#177) for each."""
    lines = list(lines)
    while True:
        text = "\n".join(lines)
        declared: dict[str, list[int]] = {}
        for k, line in enumerate(lines):
            m = _DECLARATION.match(line)
            if m and not any(effect in m.group(2) for effect in _EFFECTS):
                declared.setdefault(m.group(1), []).append(k)
        dead = {k for name, at in declared.items()
                if len(re.findall(rf"\b{name}\b", text)) == len(at) for k in at}
        if not dead:
            return lines
        lines = [line for k, line in enumerate(lines) if k not in dead]


def _staged_structs(lowered: Lowered) -> str:
    graph = lowered.graph
    b = boundary(graph)
    runs = graph.output != b    # else the output is BatchNorm's: its gradient is g itself
    rows = _RowReverse(lowered) if runs else None
    body = rows.body() if rows else ""
    slots = [operand_index(lowered)[n.attrs["path"]] for n in rows.params] if rows else []
    has_bn = bool(graph.batchnorms)
    if has_bn:
        bn_structs = _batchnorm_structs(lowered)
    else:
        stub = "// (not used: no BatchNorm)"
        bn_structs = [_element_struct(name, stub, 2, [], "0.0f") for name in ("BackwardBnSums", "BackwardPrefix")]
    rows_struct = f"""// The reverse of the row stages, one row (kgen/lower/backward.py, _RowReverse): the gradient of
// {"BatchNorm's output" if has_bn else "z"} into dst, parameter kSlotOperand[k]'s contributions added into contrib + k * plane.
struct BackwardRows {{
  static constexpr bool kRuns = {str(runs).lower()};
  static constexpr int kSlots = {len(slots)};
  static constexpr int kSlotOperand[{max(1, len(slots))}] = {{{", ".join(map(str, slots)) or "0"}}};
  // pool: the row's scratch for a pooling (2 N floats: the pooled gradient, the windows' first maxima).
  static constexpr bool kPool = {str(bool(rows and rows.pooled)).lower()};
  // m: the row's index (a per-element operand, Dropout's mask, is read at m * p.N + n). G, D: the
  // element types of the output's gradient and of dst (a 16-bit module's where nothing reads
  // them in fp32: kernels/backward.cuh, backward_staged).
  template <class G, class D>
  __device__ static void row(const float* __restrict__ zrow, const G* __restrict__ grow, D* __restrict__ dst,
                             float* __restrict__ contrib, size_t plane, int m, int N, const kgen::EpilogueParams& p,
                             float* cache, float* scratch, float* pool) {{
    (void)zrow; (void)grow; (void)dst; (void)contrib; (void)plane; (void)m; (void)N; (void)p; (void)cache;
    (void)scratch; (void)pool;
{body}
  }}
}};"""
    info = f"""// The staged backward of this part (kernels/backward.cuh, backward_staged).
struct Backward {{
  static constexpr int kKind = {KIND_NAMES[KIND_STAGED]};
  static constexpr int kParams = {len(lowered.operands)};
  static constexpr bool kScalar[{max(1, len(lowered.operands))}] = {{{_scalar_flags(lowered)}}};
  static constexpr bool kHasBatchNorm = {str(has_bn).lower()};
  using Rows = BackwardRows;
  using BnSums = BackwardBnSums;
  using Prefix = BackwardPrefix;
}};"""
    return "\n\n".join([rows_struct, *bn_structs, info])


# ---- the matrix-vector rewrite (kgen/ir/rewrite.py, row_sum_of_gemm) -------------------------------
# Its forward sums each row of y = s * z + t (z = x W^T, s and t per column: the affine chain)
# without forming z, so its backward forms no dz either: the gradient reaching y is the same for
# every column of a row (dR[m], the row sum's gradient), so dz[m][n] = dR[m] s[n] has rank one:
# dx = dR w_sum (w_sum = sum_n s[n] W_n, the forward's column sums), dW = s u^T with u = x^T dR,
# and a chain parameter's gradient, whose contribution at an element is g (a[n] z + b[n]) (the
# chain is affine in z), sums over the rows to a[n] (W_n . u) + b[n] sum_m dR[m]: sum_m dR[m]
# times the contribution at z = (W_n . u) / sum_m dR[m] (kernels/gemv_backward.cuh).
def _gemv_row_nodes(lowered: Lowered) -> tuple[Node, list[Node]]:
    """The row sum's reduction, and the live nodes from it to the part's output (it included)."""
    from kgen.ir.rewrite import row_sum_of_gemm

    graph = lowered.graph
    reduce = row_sum_of_gemm(graph).reduce
    after = _depends_on(graph, reduce.id)
    return reduce, [n for n in graph.live() if n.id in after]


def _ancestors(graph: Graph, roots) -> set[int]:
    """The ids of the nodes `roots` are computed from, and theirs (the roots included)."""
    out, todo = set(), list(roots)
    while todo:
        i = todo.pop()
        if i not in out:
            out.add(i)
            todo.extend(graph.node(i).args)
    return out


def _gemv_missing(lowered: Lowered) -> str | None:
    reduce, rows = _gemv_row_nodes(lowered)
    graph = lowered.graph
    row_ids = {n.id for n in rows}
    for n in rows[1:]:
        # (a parameter read directly or through ops on it: `* self.s`, `* self.s.exp()`)
        feeds = {graph.node(a).kind for a in _ancestors(graph, [a for a in n.args if a not in row_ids])}
        if "param" in feeds:
            return (f"no backward kernel yet for a parameter read after the matrix-vector rewrite's row "
                    f"{reduce.op}{_where(n)}")
        if feeds - {"const", "pointwise"}:
            return (f"no backward kernel yet for {', '.join(sorted(feeds - {'const', 'pointwise'}))} read after "
                    f"the matrix-vector rewrite's row {reduce.op}{_where(n)}")
        if n.kind not in ("pointwise", "const"):
            return f"no backward kernel yet for {n.kind} after the matrix-vector rewrite's row {reduce.op}{_where(n)}"
    return None


def _gemv_structs(lowered: Lowered) -> str:
    graph = lowered.graph
    operands = operand_index(lowered)
    reduce, rows = _gemv_row_nodes(lowered)
    # The row: its value from the sum, the ops after it recomputed (in fp32, as every backward
    # recomputes), then reversed from g down to the reduction.
    row = Emitter(graph, operands, {reduce.id: "r"}, bn_ready=True, element=False, module_rounding=False)
    value = {i: row.get(i) for n in rows for i in (n.id, *(n.args if n.kind == "pointwise" else ()))}
    reverse, adjoint = _elementwise_vjp(graph, rows, graph.output, "g", value)
    mean = reduce.op == "mean"
    d_sum = f"{adjoint[reduce.id]} / static_cast<float>(N)" if mean else adjoint[reduce.id]
    row_lines = [f"const float r = {'sum / static_cast<float>(N)' if mean else 'sum'};", *row.lines, *reverse,
                 f"return {d_sum};"]
    row_body = "\n".join(f"    {line}" for line in drop_unused_values(row_lines))
    # One element of the chain from z to the reduced value, as a point-wise part's Backward::apply.
    # (the chain's steps, and the per-feature operands they read with whatever those are computed
    # from: `z * self.s.exp()` reads s through exp)
    top = reduce.args[0]
    chain = _ancestors(graph, [top])
    chain_nodes = [n for n in graph.live() if n.id in chain]
    element = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready=True, element=True, module_rounding=False)
    value = {n.id: element.get(n.id) for n in chain_nodes}
    reverse, adjoint = _elementwise_vjp(graph, chain_nodes, top, "g", value)
    params = [n for n in chain_nodes if n.kind == "param"]
    slots = {operands[n.attrs["path"]]: n for n in params}
    lines = list(element.lines) + reverse + [
        f"c[{k}] = {adjoint[slots[k].id]};" if k in slots else f"c[{k}] = 0.0f;  // not read by the chain"
        for k in range(len(lowered.operands))]
    lines.append(f"return {adjoint[graph.gemm.id]};")
    element_body = "\n".join(f"    {line}" for line in drop_unused_values(lines))
    # A parameter whose contribution depends on z (it scales the chain: a mul or div by a value
    # computed from it) needs W u.
    steps = _depends_on(graph, graph.gemm.id)
    reads_z = any(n.op in ("mul", "div") and n.id in steps and any(
        graph.node(a).kind == "param" for a in _ancestors(graph, [b for b in n.args if b not in steps]))
        for n in chain_nodes if n.kind == "pointwise")
    return f"""// The matrix-vector rewrite's backward (kgen/lower/backward.py, _gemv_structs; kernels/gemv_backward.cuh).
// grad: dL/d(the row's sum over the features of the chain's value) from the sum and g, the
// gradient of the part's output (or of a broadcast tail's core value) in that row.
struct GemvRowsBackward {{
  __device__ static __forceinline__ float grad(float sum, float g, int N, const kgen::EpilogueParams& p) {{
    (void)N; (void)p;
{row_body}
  }}
}};

// One element of the affine chain from z to the reduced value: dz from g, and each parameter's
// contribution c[k] (affine in z: the kernel evaluates it at the rows' dR-weighted mean of z).
struct GemvColumnBackward {{
  __device__ static __forceinline__ float apply(float z, float g, int n, const kgen::EpilogueParams& p, float* c) {{
    (void)z; (void)n; (void)p; (void)c;
{element_body}
  }}
}};

struct Backward {{
  static constexpr int kKind = {KIND_NAMES[KIND_GEMV]};
  static constexpr int kParams = {len(lowered.operands)};
  static constexpr bool kScalar[{max(1, len(lowered.operands))}] = {{{_scalar_flags(lowered)}}};
  // Whether a parameter's gradient reads z (it scales the chain): then W u per column.
  static constexpr bool kReadsZ = {str(reads_z).lower()};
  using Rows = GemvRowsBackward;
  using Column = GemvColumnBackward;
}};"""


def operand_gradients(lowered: Lowered) -> list[tuple | None]:
    """What each operand's gradient is: ("row", k, length) the first `length` values of row k of
    the backward's column sums (None: all N; a one-element parameter's total is at [k][0]), in the
    operand's shape; ("input", slot) the gradient of an input read after the GEMM (the module's,
    an extra one), d_input's slot `slot` (input_gradient_paths); None where none flows (Dropout's
    mask: drawn, not learned, torch sends it no gradient; an input read detached). The Python
    vjp's expressions and the C++ node's plan are both written from it
    (codegen.generator.op_gradients)."""
    out: list[tuple | None] = []
    for k, n in enumerate(lowered.operands):
        if n.kind == "mask":
            out.append(None)
        elif n.kind == "input":   # the module's input (or an extra one) read after the GEMM: its slot
            sent = input_gradient_paths(lowered)
            out.append(("input", sent.index(n.attrs["path"])) if n.attrs["path"] in sent else None)
        elif n.level == "scalar":
            out.append(("row", k, 1))
        elif n.level != "col" and _numel(n.attrs["shape"]) != lowered.graph.out_features:
            out.append(("row", k, _numel(n.attrs["shape"])))   # a broadcast tail's parameter
        else:
            out.append(("row", k, None))
    return out


def _numel(shape) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


# ---- the broadcast tail ------------------------------------------------------------------------
def tail_core(lowered: Lowered) -> Node:
    """The core value the tail broadcasts (the stages' output), as a node of the traced graph."""
    return lowered.traced.node(split_tail(lowered.traced)[2])


def tail_leaves(lowered: Lowered) -> list[Node]:
    """The tail's values that take a gradient, as nodes of the traced graph: the core value
    first (its gradient is the stages' output gradient), then the module's input where a read
    of it is not detached (x.detach(), x.clone().detach(): no gradient flows through that read,
    as in torch), then each parameter the tail reads."""
    core = tail_core(lowered)
    inputs = [n for n in lowered.tail if n.kind == "input" and not n.attrs["detached"]]
    return [core, *inputs, *(n for n in lowered.tail if n.kind == "param")]


def gradient_leaves(lowered: Lowered) -> list[Node]:
    """The part's leaves (its GEMM, parameters, reads of the module's input, BatchNorm) that the
    output's gradient reaches (Graph.gradient_reaches, on the graph as traced): the others get
    None from the backward, as torch gives them; none at all: the output carries no gradient."""
    traced = lowered.traced or lowered.graph
    return [traced.node(i) for i in sorted(traced.gradient_reaches())
            if traced.node(i).kind in ("gemm", "param", "input", "batchnorm")]


def input_gradient(lowered: Lowered) -> bool:
    """Whether the part sends a gradient to the module's input read after its GEMM (in its
    broadcast tail, or per element by its stages), or to an extra input read there."""
    return bool(input_gradient_paths(lowered))


def input_gradient_paths(lowered: Lowered) -> list[str]:
    """The operand paths of the inputs read after the GEMM that the part sends a gradient to (a
    read that is not detached): the module's input's, INPUT_PATH, or an extra input's
    (graph.input_path), in the operands' order: input j's gradient is EpilogueParams::d_input[j]
    in the kernels, and the j-th block of the one fp32 buffer the caller hands them (each block
    its input's shape, in this order: generator.input_gradient_slot_lines, the emitted file's
    _kgen_input_gradients and native_backward.cpp's kInputGrad split it alike)."""
    reads = [*lowered.tail, *lowered.graph.live()]
    sent = {n.attrs["path"] for n in reads if n.kind == "input" and not n.attrs["detached"]}
    return list(dict.fromkeys(n.attrs["path"] for n in lowered.operands if n.kind == "input" and n.attrs["path"] in sent))


@functools.cache
def max_input_gradients() -> int:
    """kgen::kMaxInputGradients (kernels/common.cuh, the one place of it): EpilogueParams::d_input's
    slots, the inputs read after the GEMM whose gradients one part's kernels send."""
    text = (Path(__file__).resolve().parent.parent / "codegen" / "kernels" / "common.cuh").read_text()
    return int(re.search(r"inline constexpr int kMaxInputGradients = (\d+);", text)[1])


def _input_gradient_line(node: Node, adjoint: str, lowered: Lowered) -> str:
    """The statement adding an element's gradient of an input read at (m, n) by the stages (a tile
    value: its width is N) to its slot of EpilogueParams::d_input (input_gradient_paths); none for
    a detached read."""
    if node.attrs["detached"]:
        return f"(void){adjoint};  // x.detach() (line {node.line}): no gradient"
    slot = input_gradient_paths(lowered).index(node.attrs["path"])
    return (f"if (p.d_input[{slot}] != nullptr) p.d_input[{slot}][static_cast<long long>(m) * p.N + n] += {adjoint};"
            f"  // {node.attrs['path']}")


def tail_backward_struct(lowered: Lowered | None) -> str:
    """struct TailBackward (kernels/backward.cuh, tail_grad): for each leaf of the tail
    (tail_leaves), its element count, the output elements that read each element (`reduced`:
    the product of the output dimensions it is broadcast along) and grad<leaf>(e, r), the
    gradient that output element r of those sends to element e: the tail's values recomputed
    at that output element (forward.TailValues), then its ops' VJPs in reverse, seeded with
    g[i]. The leaf's gradient is the sum over r; for the core value it is the stages' output
    gradient (for `row + x`: sum_j g[i, j]). None, or no tail: a stub (entry.cuh names the struct)."""
    if lowered is None or not lowered.tail:
        return ("struct TailBackward {  // no broadcast tail\n  static constexpr int kLeaves = 0;\n"
                "  static constexpr int kOperand[1] = {0};\n  static constexpr bool kInput[1] = {false};\n"
                "  static constexpr int kInputSlot[1] = {0};\n"
                "  static long long count(int, int) { return 0; }\n  static long long reduced(int, int) { return 0; }\n"
                "  template <int kLeaf>\n  __device__ static __forceinline__ float grad(long long, long long, const float*, "
                "const float*, int, const kgen::EpilogueParams&) { return 0.f; }\n};")
    graph = lowered.traced
    operands = operand_index(lowered)
    out = graph.node(graph.output).shape
    rank = len(out)
    leaves = tail_leaves(lowered)
    core = leaves[0].id
    tail = sorted(lowered.tail, key=lambda n: n.id)
    shown = [d for d in range(rank) if out[d] != 1]
    flat = "0"
    for d in shown:   # the output's flat index, row-major (Horner)
        flat = f"i{d}" if flat == "0" else f"({flat}) * {out[d]} + i{d}"

    def product(sizes) -> str:
        return " * ".join(["1LL", *(str(s) for s in sizes)])

    counts, reduceds, bodies = [], [], []
    for k, leaf in enumerate(leaves):
        values = TailValues(graph, operands, core, module_rounding=False)
        shape = values.leaf_shape(leaf)
        kept = [rank - len(shape) + j for j, size in enumerate(shape) if size != 1]
        reduced = [d for d in shown if d not in kept]
        counts.append(product(shape))
        reduceds.append(product(out[d] for d in reduced))
        lines = [*split_index("e", kept, out), *split_index("r", reduced, out), f"const long long i = {flat};"]
        values.get(graph.output)
        lines += values.lines
        adjoint = {n.id: f"d{n.id}" for n in [leaves[0], *tail] if n.kind != "const"}
        lines += [f"float {adjoint[i]} = {'g[i]' if i == graph.output else '0.0f'};" for i in adjoint]
        for n in reversed(tail):
            if n.kind != "pointwise":
                continue
            grads = _vjp(graph, n, adjoint[n.id], values.get(n.id), [values.get(a) for a in n.args])
            for a, grad in zip(n.args, grads):
                if grad is not None and a in adjoint:
                    lines.append(f"{adjoint[a]} += {grad};")
        what = "the core value" if k == 0 else leaf.attrs["path"]
        body = "".join(f"\n      {line}" for line in lines)
        keyword = "if" if k == 0 else "} else if"
        bodies.append(f"    {keyword} constexpr (kLeaf == {k}) {{  // {what} {shape_text(shape)}{body}\n"
                      f"      return {adjoint[leaf.id]};")
    operand_of = ["-1"] + [str(operands[n.attrs["path"]]) for n in leaves[1:]]
    is_input = ["false"] + ["true" if n.kind == "input" else "false" for n in leaves[1:]]
    slots = input_gradient_paths(lowered)
    input_slot = ["0"] + [str(slots.index(n.attrs["path"])) if n.kind == "input" else "0" for n in leaves[1:]]
    cases = "\n".join(f"      case {k}: return {c};" for k, c in enumerate(counts))
    rcases = "\n".join(f"      case {k}: return {c};" for k, c in enumerate(reduceds))
    return f"""// The broadcast tail's backward (kgen/lower/backward.py, tail_backward_struct): leaf 0 is the core
// value (its gradient: the stages' output gradient), then the operands the tail reads (kOperand;
// kInput: an input read after the GEMM, whose gradient goes to p.d_input[kInputSlot]). grad<leaf>(e, r): what output element r of those reading the leaf's
// element e sends it; the leaf's gradient is their sum over r < reduced(leaf).
struct TailBackward {{
  static constexpr int kLeaves = {len(leaves)};
  static constexpr int kOperand[{len(leaves)}] = {{{", ".join(operand_of)}}};
  static constexpr bool kInput[{len(leaves)}] = {{{", ".join(is_input)}}};
  static constexpr int kInputSlot[{len(leaves)}] = {{{", ".join(input_slot)}}};
  static long long count(int leaf, int M) {{
    (void)M;
    switch (leaf) {{
{cases}
    }}
    return 0;
  }}
  static long long reduced(int leaf, int M) {{
    (void)M;
    switch (leaf) {{
{rcases}
    }}
    return 0;
  }}
  template <int kLeaf>
  __device__ static __forceinline__ float grad(long long e, long long r, const float* __restrict__ t,
                                               const float* __restrict__ g, int M, const kgen::EpilogueParams& p) {{
    (void)e; (void)r; (void)t; (void)M; (void)p;
{chr(10).join(bodies)}
    }}
    return 0.f;
  }}
}};"""
