"""Lowering: the epilogue IR of one module -> the CUDA of its stages and the call that feeds them.

A forward pass runs in at most two stages, split where a whole-column or whole-row statistic
must be known before it is used:

    stage 1   the GEMM, with a generated epilogue functor applied to every element of z: it
              computes the stored value S (the output itself when nothing else follows) and,
              in training mode, BatchNorm's per-tile column partials of S (fused into the GEMM
              epilogue at fusion 2, a separate column-statistics kernel at fusion 1)
    finalize  BatchNorm only: merges the partials (or reads the running statistics in eval
              mode) into per-column a, c with BN(t) = a * t + c, and updates the running buffers
    stage 2   what remains, from S: a point-wise kernel, or a row kernel (one CTA per row, the
              row of S cached in shared memory) that runs one pass per row reduction and a last
              pass that writes the output

In eval mode BatchNorm is an affine map known before the GEMM (finalize runs first), so the
whole chain up to the first row reduction runs in the GEMM epilogue. Every value of stage 2 is
recomputed from S, the row values computed so far and the parameters: S is chosen as the latest
value of stage 1 from which stage 2 can compute everything; when a later value needs one that
cannot be recomputed (a value from before BatchNorm that is not BatchNorm's input), the module
is refused.

The result is plain CUDA text (structs with static device functions that the plain CUDA kernels
in kgen/codegen/kernels/stages.cuh call) plus the list of operands (parameters and buffers) in the
order the kernels index them; generator.py writes the parameter struct, the C entry point, the
ctypes signature and the Python call from the same lists.
"""

from __future__ import annotations

import dataclasses
import re

from kgen.ir import ops
from kgen.ir import rewrite
from kgen.ir.graph import OPERAND_KINDS, Graph, Node, Unsupported, affine_chain, linear_steps, shape_text

# Parameters the epilogue can read (EpilogueParams::operand in kernels/common.cuh; a test ties
# the two).
MAX_OPERANDS = 16
REDUCE_INIT = {"sum": "0.f", "mean": "0.f", "max": "-INFINITY", "min": "INFINITY"}
# max and min propagate NaN, as torch's reductions do (kgen::nan_max in kernels/stages.cuh).
REDUCE_STEP = {"sum": "{acc} += {v};", "mean": "{acc} += {v};", "max": "{acc} = kgen::nan_max({v}, {acc});",
               "min": "{acc} = kgen::nan_min({v}, {acc});"}
REDUCE_BLOCK = {"sum": "kgen::block_sum", "mean": "kgen::block_sum", "max": "kgen::block_max",
                "min": "kgen::block_min"}
STAGE2_NONE, STAGE2_POINTWISE, STAGE2_ROWS = 0, 1, 2
# Node kinds that need a whole row of S: stage 2 runs them in the row kernel.
ROW_KINDS = ("reduce", "groupnorm", "pool", "half")


# The type the kernels read an epilogue operand in, by its node's kind (common.cuh): Param, the
# parameters' and buffers', for the module's input too (fp32 in the build for torch.autocast,
# where eager adds the fp32 input as it is); Operand, the GEMM's, for Dropout's mask (drawn in
# the dtype of the value it drops, as eager's).
OPERAND_TYPES = {"param": "kgen::Param", "mask": "kgen::Operand", "input": "kgen::Param"}


def operand_pointer(k: int, kind: str) -> str:
    """C++ for epilogue operand k (EpilogueParams::operand, untyped) as a pointer to its type."""
    return f"static_cast<const {OPERAND_TYPES[kind]}*>(p.operand[{k}])"


class _NeedsValue(Exception):
    """Stage 2 asked for a value it cannot recompute from S (the GEMM output, or a value from
    before BatchNorm)."""


def linear_output(graph: Graph) -> int | None:
    """The node holding the Linear's output (linear_steps' last), or None where the part has no
    one GEMM."""
    steps = linear_steps(graph)
    return steps[-1] if steps else None


# IR values that are not an op's result: read as they are in the module's dtype (or, constants,
# as torch applies them).
UNROUNDED_KINDS = ("const", "param", "mask", "input")


class Emitter:
    """Statements computing IR values as fp32 locals, each at most once (in dependency order).

    `available` maps node ids to the C expressions that already hold them (S, row values);
    `bn_ready` says whether BatchNorm's a, c are known (then BN(t) = fmaf(a[n], t, c[n]))."""

    def __init__(self, graph: Graph, operands: dict[str, int], available: dict[int, str],
                 bn_ready: bool, element: bool, module_rounding: bool = True):
        self.graph = graph
        self.operands = operands
        self.names = dict(available)
        self.bn_ready = bn_ready
        self.element = element      # per-element context (n is defined); else per-row
        self.group_stats: dict[int, str] = {}  # GroupNorm node -> its statistics (row kernel)
        # The traced N where the code runs in the forward row function (group sizes as constants
        # at it: AT_TRACED_WIDTH), else None.
        self.traced_width: int | None = None
        # Every op's result is rounded to the module's dtype (kgen::rounded_to_module: the identity
        # in an fp32 build), as each of torch's bf16 / fp16 ops returns a tensor of that dtype
        # (computing in fp32 inside): the Linear's output once, after its bias (rounding z before
        # the bias would move values near 0 across it: a LeakyReLU's derivative flips), then each
        # op after it; constants and parameters are not (torch applies a Python scalar in fp32).
        # Measured on an H100 before this (one rounding, after the Linear): KernelBench's eval at
        # bf16 failed 9 of 36 files, each where eager's per-op rounding put eager further from
        # fp64 than kgen and beyond 1e-2 of it (BatchNorm, GroupNorm, logsumexp).
        # (module_rounding False: the backward's recomputation, which runs in fp32 builds only.)
        self.round_ops = module_rounding
        steps = linear_steps(graph) if module_rounding else ()
        self.linear_output = steps[-1] if steps else None
        # (the Linear's steps before its output: computed in fp32, as torch's GEMM computes them)
        self.inside_linear = frozenset(steps[:-1])
        if self.linear_output is not None and self.graph.node(self.linear_output).kind == "gemm" \
                and self.linear_output in self.names:
            self.names[self.linear_output] = f"kgen::rounded_to_module<kgen_operand_t>({self.names[self.linear_output]})"
        # Row kernel only: what a pooling window's elements are computed from (S as `s`, the row
        # values so far), read at column n = j * stride + tap of the cached row.
        self.window_available: dict[int, str] | None = None
        self.lines: list[str] = []

    def get(self, i: int) -> str:
        if i in self.names:
            return self.names[i]
        n = self.graph.node(i)
        if n.kind == "const":
            return ops.cuda_float(n.attrs["value"])
        if n.kind == "gemm":
            raise _NeedsValue(n)
        if n.kind == "pool":
            return self._pool(n)
        if n.kind == "half":
            return self._half(n)
        if n.kind == "groupnorm" and n.id in self.group_stats:
            expr = _group_norm_expr(n, self.group_stats[n.id], self.get(n.args[0]), self.get, self.traced_width)
        elif n.kind in ("reduce", "groupnorm"):
            raise _NeedsValue(n)  # not among the values computed so far (`available`)
        elif n.kind == "param":
            index = "n" if n.level == "col" else "0"
            if n.level == "col" and not self.element:
                raise AssertionError("a per-column value in a per-row context")
            # A read-only load: the compiler may keep a column's across the rows a thread stores
            # (common.cuh, tile_store_as). No kernel writes a parameter the epilogue reads: a
            # BatchNorm's running buffers, which finalize updates, are refused as values
            # (trace.refuse_running_buffer_reads).
            k = self.operands[n.attrs["path"]]
            expr = f"kgen::as_float(__ldg({operand_pointer(k, n.kind)} + {index}))"
        elif n.kind == "mask":
            # Dropout's mask * scale, [M][N] row-major (training mode); nullptr in eval mode,
            # where the dropout is the identity (v * 1.f is v, infinities and NaN included).
            # (A read-only load with a signed 64-bit index: indexing with size_t made the
            # warp-specialized wgmma GEMM's epilogue spill.)
            if not self.element:
                raise AssertionError("a per-element value in a per-row context")
            k = self.operands[n.attrs["path"]]
            expr = (f"(p.operand[{k}] != nullptr ? kgen::as_float(__ldg({operand_pointer(k, n.kind)} + static_cast<long long>(m) * p.N + n)) "
                    ": 1.f)")
        elif n.kind == "input":
            # The module's input [M][K] read per element where it is a tile value (K = N: a
            # residual before a row op, trace.Tracer._tile_input), as Dropout's mask is read;
            # elsewhere it is the broadcast tail's (TailValues).
            if not self.element or n.level != "tile":
                raise AssertionError("the module's input read per element outside a tile value")
            k = self.operands[n.attrs["path"]]
            expr = f"kgen::as_float(__ldg({operand_pointer(k, n.kind)} + static_cast<long long>(m) * p.N + n))"
        elif n.kind == "batchnorm":
            if not self.bn_ready:
                raise _NeedsValue(n)
            # col_a, col_c fold BatchNorm and its input's affine prefix (bn_input_affine).
            root, steps = bn_input_affine(self.graph, n)
            expr = f"fmaf(p.col_a[n], {self.get(root)}, p.col_c[n])"
            if self.round_ops and steps and not n.fp32:
                # A 16-bit module: eager rounds the prefix's every step (z + b, then * scale) to
                # the module's dtype and normalizes that; col_at, col_ct normalize t itself, so
                # the epilogue computes t rounded the same way. Before this KernelBench's eval at
                # bf16 failed 33, 39, 41 and 97, whose eager result is 1.3-4x further from fp64
                # than the fold's. (An fp32 build keeps the fold: it compiles the other branch.)
                t = self.get(n.args[0])
                expr = (f"(std::is_same<kgen_operand_t, float>::value ? {expr} "
                        f": fmaf(p.col_at[n], {t}, p.col_ct[n]))")
        else:
            expr = _cuda_expr(self.graph, n, [self.get(a) for a in n.args], self.round_ops)
        if self.round_ops and n.kind not in UNROUNDED_KINDS and i not in self.inside_linear and not n.fp32:
            expr = f"kgen::rounded_to_module<kgen_operand_t>({expr})"
        name = f"v{i}"
        self.lines.append(f"const float {name} = {expr};")
        self.names[i] = name
        return name


    def _pool(self, n: Node) -> str:
        """The pooled value at pooled column j: a loop over the window's k taps, each computing
        the pooled input at its column n from the row of S (the taps in order and NaN
        propagating, as torch's max_pool2d / avg_pool2d kernels run them)."""
        if self.window_available is None:
            raise AssertionError("a pooling outside the row kernel")
        inner = Emitter(self.graph, self.operands, self.window_available, self.bn_ready, element=True)
        inner.group_stats = self.group_stats
        inner.traced_width = self.traced_width
        v = inner.get(n.args[0])
        k, stride = n.attrs["kernel"], n.attrs["stride"]
        name = f"v{n.id}"
        step = f"{name} = kgen::nan_max({v}, {name});" if n.op == "max" else f"{name} += {v};"
        init = "-INFINITY" if n.op == "max" else "0.f"
        what = "MaxPool1d" if n.op == "max" else "AvgPool1d"
        self.lines.append(f"float {name} = {init};  // {what}(kernel {k}, stride {stride}), line {n.line}")
        self.lines.extend(_block(f"for (int tap = 0; tap < {k}; ++tap)", [
            f"const int n = j * {stride} + tap;", ROW_READ, *inner.lines, step]))
        if n.op == "avg":
            self.lines.append(f"{name} /= {ops.cuda_float(k)};")
        self.names[n.id] = name
        return name

    def _half(self, n: Node) -> str:
        """A half's value at pooled column j: its input at column n = j + c N / 2 of the row, computed
        from S there as a pooling computes a tap (no loop: one column)."""
        if self.window_available is None:
            raise AssertionError("a half outside the row kernel")
        inner = Emitter(self.graph, self.operands, self.window_available, self.bn_ready, element=True,
                        module_rounding=self.round_ops)
        inner.group_stats = self.group_stats
        inner.traced_width = self.traced_width
        v = inner.get(n.args[0])
        name = f"v{n.id}"
        column = "j" if n.attrs["half"] == 0 else "j + N / 2"
        self.lines.append(f"float {name};  // half {n.attrs['half']} of %{n.args[0]} (columns {column}), line {n.line}")
        self.lines.extend(_block("", [f"const int n = {column};", ROW_READ, *inner.lines, f"{name} = {v};"]))
        self.names[n.id] = name
        return name


def bn_input_affine(graph: Graph, bn: Node) -> tuple[int, list[Node]]:
    """BatchNorm's input as affine_chain gives it. Folding the steps into finalize (mean_t =
    scale * mean_root + shift, var_t = scale^2 * var_root) lets stage 1 store root and take its
    statistics with no per-element work, and the shift drops out of training-mode BatchNorm
    (the Linear bias cancels)."""
    return affine_chain(graph, bn.args[0])


def _affine_struct(name: str, what: str, graph: Graph, operands: dict, steps: list[Node],
                   members: str = "") -> str:
    """struct `name` with affine(n, p, scale, shift): the per-column scale and shift of the
    affine steps (affine_chain), for a kernel that works per column; `members`: more of the
    struct's members (C++ text)."""
    lines: list[str] = []
    e = Emitter(graph, operands, {}, bn_ready=False, element=True)
    for n in steps:
        if n.op == "neg":
            lines.append(f"scale = -scale; shift = -shift;  // neg, line {n.line}")
            continue
        tile_first = graph.node(n.args[0]).level == "tile"
        o = e.get(n.args[1] if tile_first else n.args[0])
        lines.extend(e.lines)
        e.lines.clear()
        lines.append({
            "add": f"shift = shift + {o};",
            "sub": f"shift = shift - {o};" if tile_first else f"scale = -scale; shift = {o} - shift;",
            "mul": f"scale = scale * {o}; shift = shift * {o};",
            "div": f"scale = scale / {o}; shift = shift / {o};",
        }[n.op] + f"  // {n.op}, line {n.line}")
    body = "".join(f"\n    {line}" for line in lines)
    return f"""// {what}
struct {name} {{
  __device__ static __forceinline__ void affine(int n, const kgen::EpilogueParams& p, float& scale,
                                                float& shift) {{
    (void)n; (void)p;
    scale = 1.f;
    shift = 0.f;{body}
  }}{members}
}};"""


def _bn_input_struct(graph: Graph, operands: dict) -> str:
    """BnInput: BatchNorm's input t as an affine function of S, what stage 1 stores (affine), and
    the value whose statistics stage 1 takes (stat). An fp32 build takes those of S itself and
    finalize moves them to t (mean_t = scale mean_S + shift, var_t = scale^2 var_S). A 16-bit
    build takes them of t as eager's BatchNorm sees it: the Linear's output and each step after
    it rounded to the module's dtype (Emitter's per-op rounding, as the epilogue computes t
    where it normalizes). Measured on an H100 (docs/perf.md, session 9): kgen's bf16 GEMM is
    cuBLAS's to the bit, yet KernelBench's bf16 eval failed 41 and 97 by two bf16 steps near 2,
    where the statistics of the unrounded S moved the normalized value across a rounding."""
    bn = graph.batchnorms[0] if graph.batchnorms else None
    root, steps = bn_input_affine(graph, bn) if bn is not None else (None, [])
    stat = ""
    if bn is not None:
        e = Emitter(graph, operands, {root: "s"}, bn_ready=False, element=True)
        t = e.get(bn.args[0])
        body = "".join(f"\n      {line}" for line in live_lines(e.lines, t))
        stat = f"""
  // Whether stage 1's statistics are of t itself (stat), or of S (finalize moves them to t).
  static constexpr bool kStatsOfT = !std::is_same<kgen_operand_t, float>::value;
  // The value whose statistics stage 1 takes, from S at column n (< N).
  __device__ static __forceinline__ float stat(float s, int n, const kgen::EpilogueParams& p) {{
    (void)n; (void)p;
    if constexpr (!kStatsOfT) {{
      return s;
    }} else {{{body}
      return {t};
    }}
  }}"""
    return _affine_struct("BnInput", "BatchNorm's input t = scale[n] * S + shift[n], S what stage 1 "
                          "stores: finalize turns\n// the statistics of S into those of t "
                          "(kgen/lower/forward.py, bn_input_affine); in a 16-bit build stage 1 takes "
                          "those of t itself (stat).", graph, operands, steps, members=stat)


@dataclasses.dataclass
class StagePlan:
    """One mode's (training or eval) stages."""
    stored: int                 # S: the node stage 1 writes
    col_stats: bool             # stage 1 produces BatchNorm's column partials of S
    stage2: int                 # STAGE2_NONE / _POINTWISE / _ROWS
    epilogue_cuda: str          # struct <name>Epilogue
    stage2_cuda: str            # struct <name>Stage2


@dataclasses.dataclass
class Lowered:
    graph: Graph
    operands: list[Node]        # param nodes, in operand-index order
    batchnorm: str | None       # the BatchNorm1d module's path
    output_level: str           # tile / row / rowflat
    train: StagePlan
    eval: StagePlan
    cuda: str                   # the generated structs (namespace kgen_cfg)
    rewrites: list[str] = dataclasses.field(default_factory=list)  # applied, one line each
    gemv: bool = False          # the row sum as a matrix-vector product: no GEMM, no stages
    tail: list[Node] = dataclasses.field(default_factory=list)  # the broadcast tail (split_tail)
    traced: Graph | None = None  # the graph as traced (graph is its core, simplified)
    constant: float | None = None  # the output is this constant (rewrites made it): no GEMM
    eager_sums: bool = False    # its row sums run in eager's order (kernels/eager_sum.cuh)
    deferred_chain: bool = False  # fusion 0 applied: the chain after the Linear in stage 2

    @property
    def output_shape(self) -> tuple | None:
        """The output's shape when a broadcast tail makes it ("M" the batch), else None."""
        return self.traced.node(self.traced.output).shape if self.tail else None

    def describe(self) -> list[str]:
        """The IR the stages and the tail compute, one node per line."""
        lines = self.graph.describe().splitlines()
        if not self.tail:
            return lines
        return lines[:-1] + [n.describe() for n in self.tail] + [f"return %{self.traced.output}"]

    @property
    def output_is_tile(self) -> bool:
        return self.output_level == "tile"

    @property
    def fp32_output(self) -> bool:
        """Whether the kernels write the part's output in fp32 in a 16-bit build: a value eager
        keeps in float32 (Node.fp32), the rows' sums of a sum / mean of everything
        (Graph.tail_rounds), which torch's own op after the kernels sums and rounds once."""
        return self.graph.node(self.graph.output).fp32 and not self.tail

    @property
    def output_width(self) -> str:
        """Columns of the output, an expression in N (C and Python)."""
        return row_width(self.graph, self.output_level)

    def summary(self) -> list[str]:
        lines = [f"rewrite:   {r}" for r in self.rewrites]
        lines += [f"dropout:   {d['name']}, line {d['line']}: {d['in_eval']} in eval mode; "
                  + ("in training mode the forward draws torch's own mask (F.dropout of ones, the "
                     "same RNG stream) and the epilogue multiplies by it"
                     if d.get("reproduced") else
                     f"forward raises in training mode ({d['why']}: not reproduced)")
                  for d in (self.traced.dropouts if self.traced else [])]
        if any(n.kind == "input" for n in self.tail):
            lines.append("input:     the module's input is read again, per element, by the broadcast tail")
        if self.tail:
            lines.append(f"tail:      the output {shape_text(self.output_shape)} broadcast from the stages' "
                         f"({'M, ' + self.output_width if self.output_level != 'rowflat' else 'M,'}) "
                         "result by a point-wise kernel")
        if self.constant is not None:
            out = self.graph.node(self.graph.output).attrs
            if "nonfinite" in out:
                return lines + [f"stages:    none: the output is the constant {self.constant!r}, "
                                f"{out['nonfinite']!r} where what it reads is not finite (no GEMM: "
                                + ("W and " if out["reads_gemm"] else "") + "the parameters read once for "
                                "NaN and Inf, then one CTA per row" + (" reading x's row" if out["reads_gemm"] else "")
                                + ")"]
            return lines + [f"stages:    none: the output is the constant {self.constant!r} (no GEMM; "
                            "a fill kernel)"]
        if self.gemv:
            return lines + ["stages:    column sums of W (scaled) -> matrix-vector product + the row epilogue"]

        def one(plan: StagePlan) -> str:
            parts = ["GEMM + epilogue" + (" + column partials" if plan.col_stats else "")]
            if self.graph.is_prologue:   # (no GEMM: stage 2 reads x itself)
                parts = ["no GEMM: x itself"]
            if self.batchnorm:
                parts.insert(0 if plan is self.eval else 1, "BatchNorm finalize")
            parts.append({STAGE2_NONE: "", STAGE2_POINTWISE: "point-wise apply",
                          STAGE2_ROWS: "row kernel"}[plan.stage2])
            return " -> ".join(p for p in parts if p)
        if not self.batchnorm:
            return lines + [f"stages:    {one(self.eval)}"]
        return lines + [f"stages:    training: {one(self.train)}", f"           eval: {one(self.eval)}"]


def _stage1_nodes(graph: Graph, bn_ready: bool) -> set[int]:
    """Nodes the GEMM epilogue can compute: no row reduction below them, and BatchNorm only once
    its a, c are known (eval mode)."""
    ok: set[int] = set()
    for n in graph.nodes:
        if n.kind in ROW_KINDS or n.level in ("row", "rowflat", "pooled"):
            continue
        if n.kind == "batchnorm" and not bn_ready:
            continue
        if all(a in ok for a in n.args):
            ok.add(n.id)
    return ok


_CONST_DECL = re.compile(r"const float (\w+) = ")


def live_lines(lines: list[str], result: str) -> list[str]:
    """`lines` less each `const float NAME = ...;` whose NAME no later line (nor `result`) reads:
    an emitter computes the values a node needs, and some structs need fewer of them (a VJP's
    reverse pass does not read BatchNorm's input, whose gradient comes from the kept x̂); an
    emitted file has no dead code."""
    kept: list[str] = []
    later = result
    for line in reversed(lines):
        m = _CONST_DECL.match(line)
        if m and not re.search(rf"\b{m.group(1)}\b", later):
            continue
        kept.append(line)
        later += "\n" + line
    return kept[::-1]


def _epilogue_struct(name: str, graph: Graph, operands: dict, stored: int, bn_ready: bool,
                     col_stats: bool) -> str:
    e = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready, element=True)
    result = e.get(stored)
    identity = stored == graph.gemm.id
    body = "\n".join(f"    {line}" for line in live_lines(e.lines, result))
    stat = ("""
  // What BatchNorm's statistics are taken of (BnInput): the stored value itself (an fp32 build),
  // or stat of it at column n < N.
  static constexpr bool kStatsOfStored = !BnInput::kStatsOfT;
  __device__ static __forceinline__ float stat(float s, int n, const kgen::EpilogueParams& p) {
    return BnInput::stat(s, n, p);
  }""" if col_stats else "")
    return f"""struct {name}Epilogue {{
  static constexpr bool kColStats = {str(col_stats).lower()};
  static constexpr bool kIdentity = {str(identity).lower()};
  __device__ static __forceinline__ float apply(float z, int m, int n, const kgen::EpilogueParams& p) {{
    (void)m; (void)n; (void)p;
{body}
    return {result};
  }}{stat}
}};"""


def _stage2_pointwise(graph: Graph, operands: dict, stored: int, bn_ready: bool) -> str:
    e = Emitter(graph, operands, {stored: "s"}, bn_ready, element=True)
    result = e.get(graph.output)
    return "\n".join(f"    {line}" for line in live_lines(e.lines, result)), result


# The forward row function's template flag (kernels/forward.cuh, run_stage2): N is the width the
# module was traced at. There a GroupNorm's group size is a constant (a shift where it is a power
# of two; N / groups made an integer division per element of the output pass: KernelBench 37 in
# bf16 1.707 -> 1.534 ms, docs/perf.md, session 32); the file still runs at another out_features
# (the reference's constructor sets it), with the size computed.
AT_TRACED_WIDTH = "kAtTracedWidth"


def group_size(n: Node, width: int | None) -> str:
    """The elements of each group of GroupNorm n, as CUDA: N / groups, or (`width`: the traced N,
    in the forward row function) that as a constant where N is it."""
    groups = n.attrs["groups"]
    return f"(N / {groups})" if width is None else f"({AT_TRACED_WIDTH} ? {width // groups} : N / {groups})"


def group_index(n: Node, width: int | None = None) -> str:
    """The group of GroupNorm n that column n falls in, as CUDA (group_size's `width`; a
    LayerNorm's one group: 0, with no division per element)."""
    return "0" if n.attrs["groups"] == 1 else f"(n / {group_size(n, width)})"


def _group_norm_expr(n: Node, stats: str, value: str, operand, traced_width: int | None) -> str:
    """GroupNorm of `value` at column n from the row's group statistics `stats` ((mean, 1/std)
    per group), then the per-column weight and bias (`traced_width`: group_size's)."""
    group = group_index(n, traced_width)
    expr = f"(({value}) - {stats}[2 * ({group})]) * {stats}[2 * ({group}) + 1]"
    args = list(n.args[1:])
    weight = operand(args.pop(0)) if n.attrs["weight"] else None
    bias = operand(args.pop(0)) if n.attrs["bias"] else None
    if weight and bias:
        return f"fmaf({expr}, {weight}, {bias})"
    if weight:
        return f"({expr} * {weight})"
    return f"({expr} + {bias})" if bias else f"({expr})"


def _block(header: str, body: list[str]) -> list[str]:
    """`header { body }` as indented lines (body lines may themselves be blocks)."""
    return [f"{header} {{".lstrip(), *(f"  {line}" for line in body), "}"]


ROW_LOOP = "for (int n = threadIdx.x; n < N; n += blockDim.x)"
# A pass's read of its element of the row: of S (fp32, or a 16-bit module's dtype where S is one
# of its rounded ops: kernels/forward.cuh, StageInput) or of the copy in shared memory (fp32).
ROW_READ = "const float s = kgen::as_float(row[n]);"
# Before each loop over a row's columns: unrolled, a thread's loads of S from global memory (the
# passes of a row too long for shared memory read S) can be in flight together (a row that fits is
# copied into shared memory first by kgen::copy_row: one load at a time streamed S at ~1 TB/s;
# docs/perf.md, sessions 28 and 32). The order of each thread's accumulation is unchanged.
ROW_UNROLL = "#pragma unroll 4"


def row_width(graph: Graph, level: str) -> str:
    """The number of columns of a value at `level` as an expression in N (C and Python alike:
    N is non-negative, so C's / is Python's //)."""
    if level == "pooled":
        return graph.pooled_width_code()
    return {"tile": "N", "row": "1", "rowflat": "1"}[level]


def _loop(graph: Graph, level: str, body: list[str], unroll: bool = False) -> list[str]:
    """A loop of the CTA's threads over the columns of a row at `level`: n over the N columns
    of S (each reading its element `s`), or j over the P columns of the pooled row. `unroll`:
    the forward's passes (ROW_UNROLL; the backward's, unrolled, spilled a register in ptxas)."""
    first = [ROW_UNROLL] if unroll else []
    if level == "pooled":
        return [*first, *_block(f"for (int j = threadIdx.x; j < {row_width(graph, level)}; j += blockDim.x)", body)]
    return [*first, *_block(ROW_LOOP, [ROW_READ, *body])]


def is_torch_sum(n: Node) -> bool:
    """A row sum that torch computes as a reduction of its own (torch.sum, logsumexp's), which
    eager_sum.cuh can reproduce; not a softmax's or a norm's, inside that op's own kernel (the
    trace marks those with `of`)."""
    return n.kind == "reduce" and n.op == "sum" and "of" not in n.attrs


def _eager_sum(graph: Graph, level: str, acc: str, n: Node, body: list[str]) -> list[str]:
    """A row sum in eager's order (kgen::eager_row_sum): `body` computes and returns the row's
    element at column n (level tile) or j (pooled); the CTA's M rows are the grid."""
    index, read = ("j", []) if level == "pooled" else ("n", [ROW_READ])
    return [f"// sum over the row, line {n.line}, in the order of torch's CUDA reduction",
            f"float {acc} = kgen::eager_row_sum(static_cast<int>(gridDim.x), {row_width(graph, level)}, "
            f"[&](int {index}) -> float {{",
            *(f"  {line}" for line in [*read, *body]),
            "}, scratch);"]


# A group of at least this many elements, when there are fewer groups than half the row
# kernel's warps (LayerNorm is one group; GroupNorm(8) of 8192 features), is summed by several
# warps. One warp per group left 15 of a LayerNorm's 16 warps idle: its statistics took 0.12 ms
# of a 4096 x 4096 bf16 row kernel where eager's whole LayerNorm takes 0.033 (docs/perf.md,
# session 28). Smaller groups keep one warp: a 16-bit module's output is then eager's to the bit
# (torch's one-warp kernel for groups of fewer than 512 elements).
SPLIT_GROUP_ELEMENTS = 512
# The lanes a warp gives each group of fewer (up to 32 / GROUP_LANES groups a warp at once), where
# there are enough groups to keep the row kernel's warps busy so: a lane holds several of torch's
# lanes' Welford states, and the steps of torch's warp tree between them take no shuffle
# (kernels/stages.cuh, welford_virtual_reduce). A warp per group of 64 took ~100 instructions a
# group, most of them the five shuffle steps' (KernelBench 37: 64 groups of 64).
GROUP_LANES = 8
# The row kernels' warps per CTA: kernels/stages.cuh's kRowThreads / 32 (tests/test_configs.py
# ties the two).
ROW_KERNEL_WARPS = 16


def _group_stats_pass(n: Node, stats: str, emit, width: int, at_traced_width: bool = True,
                      pow2_products: bool = True) -> list[str]:
    """The pass computing GroupNorm's statistics of one row (`width` features), into `stats` in
    shared memory: in an fp32 build the mean first and then the squared deviations from it (exact
    even when |mean| >> std), in a 16-bit one torch's Welford statistics (below). One warp per
    group (its lanes stride the group's columns), several per large group (_split_group_pass), or
    for groups of at most 16 elements a segment of `lanes` lanes (the power of two that holds
    one), 32 / lanes groups a warp at once: a warp per group of 16 left half its lanes idle and
    took a Welford reduction per group (KernelBench 75 and 62, GroupNorm(512) of 8192 features:
    docs/perf.md, session 32). The segment's sums and Welford reduction are the whole warp's
    minus the steps that only add lanes without an element (an empty Welford state, or 0): the
    same bits (at the traced width: the segments are sized for its groups, and at another a lane
    takes several elements of a group, in another order than torch's). `emit()` gives a fresh
    Emitter and the name of GroupNorm's input in it. `width`: the traced N; `at_traced_width`:
    the code runs in the forward row function, which knows whether N is it (AT_TRACED_WIDTH).
    `pow2_products`: Welford's divisions by power-of-two counts as exact products (kernels/stages.cuh,
    div_by_count: the same bits; the backward's row kernel spilled with them)."""
    groups = n.attrs["groups"]
    traced_size = width // groups
    size = group_size(n, width if at_traced_width else None)
    if traced_size >= SPLIT_GROUP_ELEMENTS and 2 * groups <= ROW_KERNEL_WARPS:
        return _split_group_pass(n, stats, emit, size, pow2_products)
    # torch's lanes that hold elements of a group (the power of two that holds one, at most the
    # warp), and the lanes kgen gives a group: at most GROUP_LANES, each holding the Welford states
    # of `virtual` of torch's (lane p: torch's p, p + lanes, ...).
    torch_lanes = 32
    while torch_lanes // 2 >= traced_size and torch_lanes > 1:
        torch_lanes //= 2
    # (at least a warp's worth of lanes per warp of the row kernel's, where the groups are few:
    # KernelBench 30's 16 groups of 512 keep a warp each)
    busy = 1
    while busy * 2 <= 32 * ROW_KERNEL_WARPS // groups:
        busy *= 2
    lanes = min(torch_lanes, max(GROUP_LANES, busy))
    virtual = torch_lanes // lanes

    def loop(*step: str, stride: int = lanes, first: str = "") -> list[str]:
        e, v = emit()
        return _block("if (active)", _block(
            f"for (int n = g * size + sub{first}; n < (g + 1) * size; n += {stride})",
            [ROW_READ, *e.lines, *(line.format(v=v) for line in step)]))

    eps = ops.cuda_float(n.attrs["eps"])
    # fp32: two passes (the mean, then the squared deviations from it: exact even when |mean| >>
    # std). 16-bit: torch's own Welford statistics (kgen::welford_*), its eps in the module's
    # dtype (torch passes it so) and rsqrtf, as eager's kernel computes them, and the mean and
    # 1/std rounded to the module's dtype, as torch 2.11 stores them and normalizes with them
    # (measured on an H100: with them rounded, an emulation gives all 8,388,608 of F.group_norm's
    # bf16 outputs at KernelBench 88's shape; with fp64 statistics 44 % differ;
    # docs/experiments/s9/gn_mean_rounding.py). kgen's output is then eager's to the bit where
    # the group has fewer than 512 elements (torch's one-warp kernel).
    two_pass = [
        "float sum = 0.f;",
        *loop("sum += {v};"),
        f"const float mean = kgen::lanes_sum<{lanes}>(sum) / static_cast<float>(size);",
        "float q = 0.f;",
        *loop("const float d = {v} - mean;", "q = fmaf(d, d, q);"),
        f"q = kgen::lanes_sum<{lanes}>(q);",
        *_block("if (active && sub == 0)", [
            f"{stats}[2 * g] = mean;",
            f"{stats}[2 * g + 1] = 1.0f / sqrtf(q / static_cast<float>(size) + {eps});",
        ]),
    ]
    products = str(pow2_products).lower()

    def held_loop(step: str) -> list[str]:
        """The elements of torch's lane held * lanes + sub: at the traced width, where each of
        torch's lanes takes as many (size a multiple of torch_lanes), a loop of that constant
        count, which nvcc unrolls, its Welford counts then constants where every lane's group is
        one of the row's (each division a product by the exact reciprocal, each combine's
        branches gone: the same operations, so the same bits); elsewhere the general loop."""
        general = loop(step, stride=torch_lanes, first=f" + held * {lanes}")
        if not at_traced_width or traced_size % torch_lanes:
            return general
        e, v = emit()
        fixed = [
            "#pragma unroll",
            *_block(f"for (int k = 0; k < {traced_size // torch_lanes}; ++k)", [
                f"const int n = g * size + sub + held * {lanes} + k * {torch_lanes};",
                ROW_READ, *e.lines, step.format(v=v)])]
        if groups % (32 // lanes):   # (else every lane's group is one of the row's: no branch)
            fixed = _block("if (active)", fixed)
        return [*_block(f"if constexpr ({AT_TRACED_WIDTH})", fixed), *_block("else", general)]
    # Each of torch's lanes u takes the group's elements u, u + torch_lanes, ... (torch's stride,
    # 32, at the traced width); its state is acc[held] of lane u % lanes, held = u / lanes.
    welford = [
        "kgen::Welford acc;",
        *loop(f"kgen::welford_add<{products}>(acc, {{v}});"),
        f"acc = kgen::welford_lanes_reduce<{lanes}, {products}>(acc);",
        *_block("if (active && sub == 0)", _welford_stats(stats, eps)),
    ] if virtual == 1 else [
        f"kgen::Welford acc[{virtual}];",
        "#pragma unroll",
        *_block(f"for (int held = 0; held < {virtual}; ++held)", held_loop(f"kgen::welford_add<{products}>(acc[held], {{v}});")),
        f"const kgen::Welford total = kgen::welford_virtual_reduce<{torch_lanes}, {lanes}, {products}>(acc);",
        *_block("if (active && sub == 0)", _welford_stats(stats, eps, "total")),
    ]
    per_warp = 32 // lanes
    return [
        f"__shared__ float {stats}[2 * {groups}];  // GroupNorm, line {n.line}: (mean, 1/std) per group",
        *_block("", [
            f"const int size = {size}, lane = threadIdx.x % 32, sub = lane % {lanes};  // {lanes} lanes a group",
            # whole warps go round the loop (the shuffles need every lane): `active` says whether
            # a lane's group is one of the row's
            *_block(f"for (int g0 = threadIdx.x / 32 * {per_warp}; g0 < {groups}; g0 += blockDim.x / 32 * {per_warp})", [
                f"const int g = g0 + lane / {lanes};",
                f"const bool active = g < {groups};",
                *_stats_pass_branches(n, two_pass, welford),
            ]),
            "__syncthreads();",
        ]),
    ]


def _stats_pass_branches(n: Node, two_pass: list[str], welford: list[str]) -> list[str]:
    """A group-statistics pass's code for GroupNorm n: the fp32 build's two passes, and a 16-bit
    build's torch Welford with the statistics rounded, as torch 2.11's GroupNorm takes them. A
    LayerNorm runs the two passes in every build: torch's LayerNorm keeps its mean and 1/std in
    fp32 in a 16-bit module too (vectorized_layer_norm_kernel: rounded statistics moved kgen's
    outputs off eager's), and two passes cost no division per element (the Welford step's)."""
    if n.attrs.get("layer") or n.fp32:   # (of a value eager holds in float32: the fp32 build's)
        return _block("", two_pass)
    return [*_block("if constexpr (std::is_same<kgen_operand_t, float>::value)", two_pass),
            *_block("else", welford)]


def _welford_stats(stats: str, eps: str, acc: str = "acc") -> list[str]:
    """A group's Welford state `acc` as its (mean, 1/std), rounded to the module's dtype."""
    return [f"{stats}[2 * g] = kgen::rounded_to_module<kgen_operand_t>({acc}.mean);",
            f"{stats}[2 * g + 1] = kgen::rounded_to_module<kgen_operand_t>("
            f"rsqrtf({acc}.m2 / {acc}.nf + kgen::rounded_to_module<kgen_operand_t>({eps})));"]


def _split_group_pass(n: Node, stats: str, emit, size: str, pow2_products: bool = True) -> list[str]:
    """_group_stats_pass with `per` warps summing each group (the CTA's warps shared out among
    the groups, in rounds where there are more groups than warps): each warp's partial sums (fp32)
    or Welford state (16-bit) into shared memory, then combined in warp order (deterministic)."""
    groups = n.attrs["groups"]
    eps = ops.cuda_float(n.attrs["eps"])

    def loop(*step: str) -> list[str]:
        e, v = emit()
        return _block("if (active)", _block(
            "for (int n = g * size + sub * 32 + lane; n < (g + 1) * size; n += 32 * per)",
            [ROW_READ, *e.lines, *(line.format(v=v) for line in step)]))

    def combined(what: str) -> list[str]:   # the group's warps' partials, in order
        return [f"float {what} = 0.f;", f"for (int k = 0; k < per; ++k) {what} += part[(warp - sub) + k];"]

    two_pass = [
        "float sum = 0.f;",
        *loop("sum += {v};"),
        "sum = kgen::warp_sum(sum);",
        "if (lane == 0) part[warp] = sum;",
        "__syncthreads();",
        *_block("", [*combined("total"), "mean = total / static_cast<float>(size);"]),
        "__syncthreads();   // (part is read before the next partials go in)",
        "float q = 0.f;",
        *loop("const float d = {v} - mean;", "q = fmaf(d, d, q);"),
        "q = kgen::warp_sum(q);",
        "if (lane == 0) part[warp] = q;",
        "__syncthreads();",
        *_block("if (active && sub == 0 && lane == 0)", [
            *combined("total"),
            f"{stats}[2 * g] = mean;",
            f"{stats}[2 * g + 1] = 1.0f / sqrtf(total / static_cast<float>(size) + {eps});",
        ]),
    ]
    welford = [
        "kgen::Welford acc;",
        *loop(f"kgen::welford_add<{str(pow2_products).lower()}>(acc, {{v}});"),
        f"acc = kgen::welford_warp_reduce<{str(pow2_products).lower()}>(acc);",
        *_block("if (lane == 0)", ["part[3 * warp] = acc.mean;", "part[3 * warp + 1] = acc.m2;",
                                   "part[3 * warp + 2] = acc.nf;"]),
        "__syncthreads();",
        *_block("if (active && sub == 0 && lane == 0)", [
            "acc = kgen::Welford{};",
            *_block("for (int k = 0; k < per; ++k)", [
                "const int w = warp + k;",
                f"acc = kgen::welford_combine<{str(pow2_products).lower()}>(acc, kgen::Welford{{part[3 * w], part[3 * w + 1], part[3 * w + 2], 0}});"]),
            *_welford_stats(stats, eps),
        ]),
    ]
    return [
        f"__shared__ float {stats}[2 * {groups}];  // GroupNorm, line {n.line}: (mean, 1/std) per group",
        *_block("", [
            "__shared__ float part[3 * 32];   // each warp's partials",
            f"const int size = {size}, lane = threadIdx.x % 32, warp = threadIdx.x / 32;",
            "const int warps = blockDim.x / 32;",
            f"const int per = warps >= {groups} ? warps / {groups} : 1;   // warps per group",
            "const int round = warps / per;   // groups per round",
            *_block(f"for (int g0 = 0; g0 < {groups}; g0 += round)", [
                "const int g = g0 + warp / per, sub = warp % per;",
                f"const bool active = warp / per < round && g < {groups};",
                "float mean = 0.f;",
                "(void)mean;",
                *_stats_pass_branches(n, two_pass, welford),
                "__syncthreads();",
            ]),
        ]),
    ]


def _cache_node(graph: Graph, operands: dict, stored: int, bn_ready: bool) -> int:
    """What the row kernel keeps in shared memory: S, or (when the first pass is a row reduction
    of a tile value x and every later pass can be computed from x and the row values) x itself,
    so that later passes neither re-read the per-column parameters nor recompute the element
    chain up to x (problem 84: x = scale * (a * S + c))."""
    live = [n for n in graph.live()]
    if any(n.kind in ("groupnorm", "pool", "half") for n in live):
        return stored
    reductions = [n for n in live if n.kind == "reduce"]
    if not reductions or graph.node(reductions[0].args[0]).level != "tile":
        return stored
    x = reductions[0].args[0]
    rows = {n.id: f"r{n.id}" for n in live if n.level in ("row", "rowflat")}
    later = [r.args[0] for r in reductions[1:]] + ([graph.output] if graph.output_level() == "tile" else [])
    try:
        for node in later:
            Emitter(graph, operands, {x: "s", **rows}, bn_ready, element=True).get(node)
    except _NeedsValue:
        return stored
    return x


# The row function's store of an output value: in the output's type Out (kernels/stages.cuh,
# row_kernel; fp32, or a 16-bit module's dtype, rounded to nearest even as torch's .to does).
OUTPUT_STORE = "kgen::OutputType<Out>::one({})"


def _stage2_rows(graph: Graph, operands: dict, stored: int, bn_ready: bool, cached: bool,
                 eager_sums: bool = False) -> str:
    """The row function's body: one pass per row reduction and per GroupNorm, then the output
    pass (tile or pooled output) or thread 0's store (row output). `cached`: `cache` holds the
    row in shared memory (_cache_node says of which value): S copied in first (16-byte loads,
    four in flight a thread: kgen::copy_row), which a first pass over the columns in order (a row
    reduction of a tile value) turns into the value kept where that is not S; the later passes
    read the copy. Not cached: every pass reads S. `eager_sums`: row sums in the order torch's
    CUDA reduction takes them (kernels/eager_sum.cuh), for a GEMM that is eager's own. (The first
    pass read S from global memory itself before, four floats in flight a thread: KernelBench
    66's softmax over 16384 columns took 0.015 ms for 8 MB, latency-bound: docs/perf.md, session 32.)"""
    live = {n.id for n in graph.live()}
    rows: dict[int, str] = {}     # row values computed so far
    row_scope: dict[int, str] = {}  # everything the row ops declared in the function's scope
    groups: dict[int, str] = {}   # GroupNorm node -> its statistics array
    kept = _cache_node(graph, operands, stored, bn_ready) if cached else stored
    out: list[str] = [("const float* row = cache;  // the copy of the row of S (kgen::copy_row, before the first pass)"
                       if cached else "const auto* row = src;  // the row of S")]
    copied = not cached   # whether `row` reads the copy in shared memory yet (or S, uncached)
    holds = stored        # the value `row` holds: S, then (after a first pass that makes it) kept

    def copy_row():
        nonlocal copied
        if not copied:
            out.extend(["kgen::copy_row(src, cache, N);", "__syncthreads();"])
            copied = True

    def emitter(element: bool = True, level: str = "tile") -> Emitter:
        """An emitter for one pass: per element of the row (level tile), per pooled column
        (level pooled: values of S only inside a pooling window), or per row (element False)."""
        window = {holds: "s", **rows}
        e = Emitter(graph, operands, window if element and level == "tile" else {**row_scope, **rows}, bn_ready,
                    element=element and level == "tile")
        e.group_stats = groups
        e.traced_width = graph.out_features
        e.window_available = window
        return e

    for n in graph.nodes:
        if n.id not in live:
            continue
        if n.kind == "groupnorm":
            def emit(n=n):
                e = emitter()
                return e, e.get(n.args[0])
            groups[n.id] = f"g{n.id}"
            copy_row()
            out.extend(_group_stats_pass(n, groups[n.id], emit, graph.out_features))
        elif n.kind == "reduce":
            level = graph.node(n.args[0]).level
            # this pass turns the copy of S into the value kept, each thread its own columns
            fill = holds != kept and level == "tile"
            copy_row()
            e = emitter(level=level)
            v = e.get(n.args[0])
            if fill:
                e.lines.append(f"cache[n] = {e.get(kept)};")
            acc = f"r{n.id}"
            if eager_sums and is_torch_sum(n):
                out.extend(_eager_sum(graph, level, acc, n, [*e.lines, f"return {v};"]))
            else:
                out.append(f"float {acc} = {REDUCE_INIT[n.op]};  // {n.op} over the row, line {n.line}")
                out.extend(_loop(graph, level, [*e.lines, REDUCE_STEP[n.op].format(acc=acc, v=v)], unroll=True))
                out.append(f"{acc} = {REDUCE_BLOCK[n.op]}({acc}, scratch);")
            if fill:
                out.append("__syncthreads();")
                holds = kept
            if n.op == "mean":
                out.append(f"{acc} /= static_cast<float>({row_width(graph, level)});")
            # (a 16-bit module's reduction returns its dtype, summed in fp32: Emitter's rounding)
            if not n.fp32:   # (a value eager holds in float32 after an upcast: Node.fp32)
                out.append(f"{acc} = kgen::rounded_to_module<kgen_operand_t>({acc});")
            rows[n.id] = acc
        elif n.level in ("row", "rowflat"):
            e = emitter(element=False)
            v = e.get(n.id)
            out.extend(e.lines)
            rows[n.id] = v
            # What it declared in the function's scope (a one-element parameter, say) is there
            # for the later row ops too: declaring it again would not compile.
            row_scope.update(e.names)
    if graph.output_level() in ("tile", "pooled"):
        level = graph.output_level()
        copy_row()   # (no pass before it read the row: a pooling alone)
        e = emitter(level=level)
        v = e.get(graph.output)
        out.extend(_loop(graph, level, [*e.lines, f"dst[{'n' if level == 'tile' else 'j'}] = {OUTPUT_STORE.format(v)};"],
                         unroll=True))
    else:
        out.append(f"if (threadIdx.x == 0) dst[0] = {OUTPUT_STORE.format(rows[graph.output])};")
    return "\n".join(f"      {line}" for line in out)


def _stage2_struct(name: str, kind: int, pointwise: tuple[str, str] | None,
                   rows: tuple[str, str] | None, module_typed: bool = False,
                   eager_sums: bool = False, traced_width: int = 0) -> str:
    """`rows`: the row function's bodies with and without the shared-memory copy; `module_typed`:
    S may be stored in a 16-bit module's dtype (kernels/forward.cuh, StageInput); `eager_sums`:
    the rows sum in eager's order (kernels/eager_sum.cuh), which needs the row kernel's full
    kRowThreads threads (ATen's order may take up to 512 threads of a row); `traced_width`: the
    row function has code for N at the traced width (AT_TRACED_WIDTH), else 0."""
    apply_body, apply_result = pointwise or ("", "s")
    rows_body = ""
    if rows:
        rows_body = (f"\n    if constexpr (kCached) {{\n{rows[0]}\n    }} else {{\n{rows[1]}\n    }}")
    return f"""struct {name}Stage2 {{
  static constexpr int kKind = {kind};  // 0: none, 1: point-wise, 2: rows
  // S, what stage 1 stores, is a value the epilogue rounds to the module's dtype: a 16-bit build
  // may store it in that dtype (kernels/forward.cuh, StageInput).
  static constexpr bool kSModuleTyped = {str(module_typed).lower()};
  // The rows sum in eager's order (kernels/eager_sum.cuh): the row kernel runs kRowThreads threads.
  static constexpr bool kEagerSums = {str(eager_sums and kind == STAGE2_ROWS).lower()};
  // The width the module was traced at, where the row function has code for it (a GroupNorm of
  // several groups: their size a constant there), else 0.
  static constexpr int kTracedWidth = {traced_width};
  __device__ static __forceinline__ float apply(float s, int m, int n, const kgen::EpilogueParams& p) {{
    (void)m; (void)n; (void)p;{chr(10) + apply_body if apply_body else ""}
    return {apply_result};
  }}
  // kCached: `cache` holds room for the row in shared memory. m: the row (per-element operands).
  // Out: the output's type (fp32, or the module's 16-bit dtype: kernels/common.cuh, OutputType).
  // kAtTracedWidth: N is kTracedWidth (group sizes as constants: lower/forward.py, AT_TRACED_WIDTH).
  // In: S's type (fp32, or the module's 16-bit dtype: kSModuleTyped).
  template <bool kCached, class Out, bool kAtTracedWidth = false, class In = float>
  __device__ static void row(const In* __restrict__ src, Out* __restrict__ dst, int m, int N,
                             const kgen::EpilogueParams& p, float* cache, float* scratch) {{
    (void)src; (void)dst; (void)m; (void)N; (void)p; (void)cache; (void)scratch;{rows_body}
  }}
}};"""


def _check_prologue(graph: Graph) -> None:
    """A prologue's refusals, each naming its op and line: what its stages do not take."""
    for n in graph.live():
        if n.kind == "batchnorm":
            raise Unsupported(f"line {n.line}: `{n.text}`: BatchNorm1d of the module's input before the first GEMM "
                              "is not supported yet (kgen takes row-wise and point-wise ops there: LayerNorm, "
                              "RMSNorm, activations, Dropout)")
    output = graph.node(graph.output)
    if output.kind == "const":
        raise Unsupported(f"line {output.line}: `{output.text}`: the ops on the module's input before the first "
                          "GEMM give a constant")


def _plan(name: str, graph: Graph, operands: dict, training: bool, fused_stats: bool,
          eager_sums: bool = False, deferred: int | None = None) -> StagePlan:
    """`deferred`: the node stage 1 stores where the point-wise chain after it runs in a kernel
    of its own (fusion 0: deferred_store), else None."""
    bns = graph.batchnorms
    bn_ready = not (training and bns)
    stage1 = _stage1_nodes(graph, bn_ready)
    has_rows = any(n.kind in ROW_KINDS for n in graph.live())
    if graph.is_prologue:
        candidates = [graph.gemm.id]   # (S is the module's input, which stage 2 reads: no stage 1)
    elif deferred is not None:
        candidates = [deferred]
    elif training and bns:
        (bn,) = bns
        stored, _ = bn_input_affine(graph, bn)
        if stored not in stage1:
            raise Unsupported(f"line {bn.line}: BatchNorm1d of a value computed after a row reduction")
        candidates = [stored]
    elif graph.output in stage1:
        candidates = [graph.output]
    else:
        candidates = sorted((i for i in stage1 if graph.node(i).level == "tile"), reverse=True)
    for stored in candidates:
        try:
            if stored == graph.output and not (training and bns) and not graph.is_prologue:
                kind, pointwise, rows = STAGE2_NONE, None, None
            elif has_rows:
                kind, pointwise = STAGE2_ROWS, None
                rows = tuple(_stage2_rows(graph, operands, stored, True, cached, eager_sums)
                             for cached in (True, False))
            else:
                kind, rows = STAGE2_POINTWISE, None
                pointwise = _stage2_pointwise(graph, operands, stored, True)
        except _NeedsValue as e:
            blocked = e.args[0]
            continue
        col_stats = bool(training and bns and fused_stats)
        # S in the module's dtype (a 16-bit build): where a point-wise or row stage 2 alone reads
        # it (no BatchNorm statistics of S) and the value is one of the module's ops, which the
        # epilogue rounds to that dtype anyway (Emitter): the same bits in half the bytes, written
        # by the GEMM and read by stage 2. (z itself is stored unrounded: kIdentity.)
        module_typed = (kind in (STAGE2_POINTWISE, STAGE2_ROWS) and not (training and bns)
                        and graph.node(stored).kind not in UNROUNDED_KINDS + ("gemm",)
                        and not graph.node(stored).fp32)   # (a value eager holds in fp32: stored so)
        # (a prologue's S is the module's input, in its dtype: stage 2 reads x as it is)
        module_typed = module_typed or graph.is_prologue
        return StagePlan(stored, bool(training and bns), kind,
                         _epilogue_struct(name, graph, operands, stored, bn_ready, col_stats),
                         _stage2_struct(name, kind, pointwise, rows, module_typed, eager_sums,
                                        graph.out_features if rows and AT_TRACED_WIDTH in rows[0] else 0))
    line = f"line {blocked.line}: " if blocked.line else ""
    raise Unsupported(f"{line}`{blocked.text}`: a later op uses a value from before "
                      f"{'BatchNorm1d' if bns else 'the row reduction'} that cannot be recomputed "
                      "from what the GEMM stage stores")


# CUDA's accurate math functions: tens of instructions each, the costly part of a chain.
_MATH_CALL = re.compile(r"\b(?:expf|expm1f|exp2f|logf|log1pf|log2f|tanhf|erff|erfcf|powf|sinf|cosf|atanf)\(")


def deferred_store(graph: Graph) -> int | None:
    """Fusion 0: the node stage 1 stores where the GEMM's epilogue stops at the Linear's output
    (z + bias) and a point-wise kernel of its own applies the chain after it; None where the
    part's chain is not a point-wise one (BatchNorm, a row reduction) or is the Linear alone.
    The GEMM's epilogue runs on its consumer warps only, after the mainloop, unoverlapped: a
    chain of accurate exp / log / erf / tanh there costs more than the point-wise kernel's read
    and write of the output at full occupancy (docs/perf.md, session 12). `graph`: simplified,
    its broadcast tail split off."""
    if (graph.batchnorms or any(n.kind in ROW_KINDS for n in graph.live())
            or graph.node(graph.output).kind == "const"):
        return None
    stage1 = _stage1_nodes(graph, True)
    stored = linear_output(graph)
    if graph.output not in stage1 or stored not in stage1 or stored == graph.output:
        return None
    return stored


def fusion0_moves(part: Graph) -> int | None:
    """What fusion 0 does to one GEMM part as traced (lower(defer_chain=True) decides the same
    way): None where it lowers the part as fusion 1 does (no point-wise chain after the Linear, or
    a broadcast tail, whose forward keeping z makes its core value in the epilogue), else the
    accurate math calls per element of the chain it moves out of the GEMM's epilogue."""
    core, tail, _ = split_tail(part)
    graph = rewrite.simplify(core)[0]
    if tail or deferred_store(graph) is None:
        return None
    return chain_math_calls(graph)


def split_keeps_infinities(graph: Graph) -> bool:
    """Whether a point-wise op of the module can turn a NaN into a number
    (ops.gives_a_number_for_nan, with the op's constant operands as they are): the tf32x3
    split's NaN where eager's product is +-inf would then come out a wrong number, so the
    module's split keeps infinities (mma_detail.cuh, KGEN_SPLIT_KEEPS_INFINITIES)."""
    for n in graph.live():
        if n.kind == "pointwise" and n.op:
            operands = [graph.node(a).attrs.get("value") if graph.node(a).kind == "const" else None for a in n.args]
            if ops.gives_a_number_for_nan(n.op, operands, n.attrs):
                return True
    return False


def chain_math_calls(graph: Graph) -> int:
    """The accurate math functions (exp, log, erf, tanh, ...) the point-wise chain after the
    Linear's output calls per element, from the op table's CUDA: what fusion 0 takes out of the
    GEMM's epilogue (0 where deferred_store finds no such chain)."""
    stored = deferred_store(graph)
    if stored is None:
        return 0
    after, live = {stored}, {n.id for n in graph.live()}
    calls = 0
    for n in graph.nodes:
        if n.id in live and n.id not in after and any(a in after for a in n.args):
            after.add(n.id)
            if n.op:
                calls += len(_MATH_CALL.findall(ops.cuda_expr(n.op, [f"a{i}" for i in range(len(n.args))], n.attrs)))
    return calls


def _gemv_rows_struct(graph: Graph, operands: dict, reduce: Node) -> str:
    """struct GemvRows: from a row's sum (the matrix-vector product plus the shifts) to the
    row's output, through the row-level ops after the reduction."""
    e = Emitter(graph, operands, {reduce.id: "r"}, bn_ready=True, element=False)
    v = e.get(graph.output)
    r = "sum / static_cast<float>(N)" if reduce.op == "mean" else "sum"
    body = "".join(f"\n    {line}" for line in live_lines(e.lines, v))
    # (a 16-bit module's reduction returns its dtype, as the row kernels' do)
    return f"""// The row's {reduce.op} over the features (line {reduce.line}), then the ops after it, each
// rounded to the module's dtype as torch's ops round (the identity in fp32).
struct GemvRows {{
  __device__ static __forceinline__ float finish(float sum, int N, const kgen::EpilogueParams& p) {{
    (void)N; (void)p;
    const float r = {r if reduce.fp32 else f"kgen::rounded_to_module<kgen_operand_t>({r})"};{body}
    return {v};
  }}
}};"""


CORE_LEVELS = ("tile", "row", "rowflat", "pooled")
# The epilogue of the forward that keeps z for a point-wise backward (kernels/entry_backward.cuh)
# where stage 1's epilogue is the whole chain.
KEEP_Z_IS_EVAL = "using KeepZEpilogue = EvalEpilogue;  // the forward keeping z: the whole chain"
GEMV_ROWS_STUB = ("struct GemvRows {  // (not used: no matrix-vector rewrite)\n  __device__ static "
                  "__forceinline__ float finish(float sum, int, const kgen::EpilogueParams&) { return sum; }\n};")


CONSTANT_READS_STUB = ("struct ConstantReads {  // (not used: the output is no constant)\n"
                       "  static constexpr bool kAny = false;\n};")


def constant_reads_struct(graph: Graph, output: Node, operands: dict[str, int]) -> str:
    """kgen_cfg::ConstantReads of a constant output (kernels/constant.cuh): what the chain that
    rewrite.simplify folded into it read (x's row and W, and parameters), and its value where
    one of those holds a NaN or an infinity."""
    attrs = output.attrs
    if "nonfinite" not in attrs:
        return ("struct ConstantReads {  // (the constant reads nothing: a plain fill)\n"
                "  static constexpr bool kAny = false;\n};")
    by_path = {n.attrs["path"]: n for n in graph.params}
    loops, largest = [], 1
    for path in attrs["reads"]:
        n = by_path[path]
        count = {"col": "N", "scalar": "1"}.get(n.level)
        if count is None:
            largest = max(largest, _numel(n.attrs["shape"]))
            count = str(_numel(n.attrs["shape"]))
        loops.append(f"    for (long long i = first; i < {count}; i += step) "
                     f"bad |= kgen::is_nonfinite(kgen::as_float({operand_pointer(operands[path], n.kind)}[i]));  // {path} ({n.level})")
    reads = (["x's row m (that row)", "W (every row)"] if attrs["reads_gemm"] else []) + \
        [f"{p} (every row)" for p in attrs["reads"]]
    return "\n".join([
        f"// The output is {attrs['value']!r} where what the rewritten chain read is finite, and "
        f"{attrs['nonfinite']!r} (torch's) where",
        f"// one of these holds a NaN or an infinity: {', '.join(reads)}.",
        "struct ConstantReads {",
        "  static constexpr bool kAny = true;",
        f"  static constexpr bool kReadsGemm = {'true' if attrs['reads_gemm'] else 'false'};",
        f"  static constexpr float kNonFiniteValue = {ops.cuda_float(attrs['nonfinite'])};",
        f"  static constexpr long long kMaxNumel = {largest};  // the largest parameter of another shape",
        "  // Whether an element first, first + step, ... of a parameter it reads is NaN or infinite.",
        "  __device__ static __forceinline__ bool params_nonfinite(const kgen::EpilogueParams& p, int N, "
        "long long first, long long step) {",
        "    (void)p; (void)N; (void)first; (void)step;",
        "    bool bad = false;",
        *loops,
        "    return bad;",
        "  }",
        "};"])


def _numel(shape) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


def split_tail(graph: Graph) -> tuple[Graph, list[Node], int | None]:
    """A graph whose output has a shape of its own (level full: a parameter of another shape
    broadcast onto the output) as its core (the same nodes, the output being the one value of
    the usual levels the full values are computed from) and the tail: the nodes from the core
    value and the parameters to the output, in graph order. No tail: (graph, [], None)."""
    if graph.output_level() != "full":
        return graph, [], None
    tail, cores, stack, seen = [], set(), [graph.output], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        n = graph.node(i)
        if n.level in CORE_LEVELS:
            cores.add(i)
        else:
            tail.append(n)
            stack.extend(n.args)
    if len(cores) != 1:
        out = graph.node(graph.output)
        at = f"line {out.line}: " if out.line else ""
        raise Unsupported(f"{at}`{out.text}`: the output broadcasts "
                          f"{'no value computed from the input' if not cores else 'two values computed from the input'} "
                          "against parameters of other shapes; kgen broadcasts one")
    (core,) = cores
    core_graph = graph.with_nodes(graph.nodes, core)
    return core_graph, sorted(tail, key=lambda n: n.id), core


def _core_shape(graph: Graph, core: Node) -> tuple:
    """The core value's shape, "M" the batch."""
    return ("M",) + graph.level_shape(core.level, 1)[1:]


class TailValues:
    """C statements computing the broadcast tail's values at one output element, whose indices
    i<d> (one per output dimension of size > 1) are defined: the core value t and each operand
    read at the offset torch's broadcasting gives (contiguous strides, 0 along its broadcast
    dims). The forward's struct Tail and the backward's TailBackward (kgen/lower/backward.py)
    both compute them so; the forward rounds each op's result to the module's dtype as torch's
    ops round (module_rounding, the Emitter's; the backward's recomputation runs in fp32 builds)."""

    def __init__(self, graph: Graph, operands: dict, core: int, module_rounding: bool = True):
        self.graph, self.operands, self.core = graph, operands, core
        self.round_ops = module_rounding
        self.out = graph.node(graph.output).shape
        self.rank = len(self.out)
        self.names: dict[int, str] = {}
        self.lines: list[str] = []

    def offset(self, shape: tuple) -> str:
        """The flat offset, in a contiguous tensor of `shape` (right-aligned to the output), of
        the element the current output element reads."""
        terms = []
        for k, size in enumerate(shape):
            if size == 1:
                continue
            stride = 1
            for s in shape[k + 1:]:
                stride *= s
            d = self.rank - len(shape) + k
            terms.append(f"i{d}" + (f" * {stride}" if stride != 1 else ""))
        return " + ".join(terms) or "0"

    def leaf_shape(self, n: Node) -> tuple:
        """The shape a leaf of the tail (the core value, a parameter, the module's input) is read as."""
        if n.id == self.core:
            return _core_shape(self.graph, n)
        if n.kind == "param":
            return tuple(n.attrs["shape"])
        return tuple(n.shape)

    def get(self, i: int) -> str:
        if i in self.names:
            return self.names[i]
        n = self.graph.node(i)
        if n.kind == "const":
            return ops.cuda_float(n.attrs["value"])
        if i == self.core:
            expr = f"t[{self.offset(self.leaf_shape(n))}]"
        elif n.kind in ("param", "input"):   # the module's input: (M, K), row-major
            expr = f"kgen::as_float({operand_pointer(self.operands[n.attrs['path']], n.kind)}[{self.offset(self.leaf_shape(n))}])"
        else:
            expr = _cuda_expr(self.graph, n, [self.get(a) for a in n.args], self.round_ops)
            if self.round_ops and not n.fp32:
                expr = f"kgen::rounded_to_module<kgen_operand_t>({expr})"
        self.names[i] = f"v{i}"
        self.lines.append(f"const float v{i} = {expr};")
        return self.names[i]


def _cuda_expr(graph: Graph, n: Node, operands: list[str], round_ops: bool) -> str:
    """Point-wise op n's CUDA expression on the operand expressions; where torch's kernel takes a
    Python number in the tensor's own dtype (ops.DIVISOR_IN_TENSOR_DTYPE, a comparison's number:
    ops.NUMBER_OPERANDS_IN_TENSOR_DTYPE) and the tensor is in the module's dtype (not an upcast's
    fp32 value; not the backward's recomputation, which rounds nothing), with the number rounded to
    it. A comparison's dtype is that of the values it compares (where(y > 0.1, h.float(), 0) of a
    16-bit y compares in y's dtype, though its result is fp32)."""
    compared = [graph.node(a) for a in n.args[:2]] if n.op in ops.NUMBER_OPERANDS_IN_TENSOR_DTYPE else [n]
    in_dtype = round_ops and not any(c.fp32 for c in compared)
    numbers = [k for k, a in enumerate(n.args) if graph.node(a).kind == "const"]
    return ops.cuda_expr(n.op, operands, n.attrs, "kgen::rounded_to_module<kgen_operand_t>" if in_dtype else None,
                         numbers)


def split_index(var: str, dims: list[int], sizes: tuple) -> list[str]:
    """Statements defining i<d> for each of `dims` (in order, the last fastest) from the flat
    index `var` (a long long they consume), sizes[d] the size of dimension d."""
    lines = []
    for k, d in enumerate(reversed(dims)):
        if k == len(dims) - 1:
            lines.append(f"const long long i{d} = {var};  // dim {d} ({sizes[d]})")
        else:
            lines.append(f"const long long i{d} = {var} % {sizes[d]}; {var} /= {sizes[d]};  // dim {d}")
    return lines


def _tail_struct(graph: Graph, operands: dict, tail: list[Node], core: int | None) -> str:
    """struct Tail: numel(M), the output's element count, and at(i, t, M, p), the output's
    element i (row-major) from the core value t and the parameters (TailValues)."""
    if core is None:
        return ("struct Tail {  // no broadcast tail\n  static long long numel(int) { return 0; }\n"
                "  __device__ static __forceinline__ float at(long long, const float*, int, "
                "const kgen::EpilogueParams&) { return 0.f; }\n};")
    out = graph.node(graph.output).shape
    values = TailValues(graph, operands, core)
    lines = split_index("i", [d for d in range(len(out)) if out[d] != 1], out)
    result = values.get(graph.output)
    lines += values.lines
    numel = " * ".join(str(d) for d in out if d != 1) or "1"
    body = "".join(f"\n    {line}" for line in lines)
    shape_text = ", ".join(map(str, out))
    return f"""// The output ({shape_text}): torch broadcasts the core value ({', '.join(map(str, _core_shape(graph, graph.node(core))))}) against the parameters.
struct Tail {{
  static long long numel(int M) {{ (void)M; return 1LL * {numel}; }}
  __device__ static __forceinline__ float at(long long i, const float* __restrict__ t, int M,
                                             const kgen::EpilogueParams& p) {{
    (void)M; (void)t; (void)p;{body}
    return {result};
  }}
}};"""


def rewritten(graph: Graph) -> tuple[Graph, list[Node], int | None, list[str]]:
    """What `lower` lowers of a traced part: split_tail's core (with the tail and its core value),
    rewrite.simplify applied, then rewrite.pool_as_weight where there is no broadcast tail (whose
    shapes are the traced N's); and the lines saying which rewrites applied. Its out_features
    is the N of the GEMM the part runs."""
    graph, tail, core = split_tail(graph)
    graph, rewrites = rewrite.simplify(graph)
    if not tail and not graph.is_prologue:   # (a prologue has no weight to pool)
        graph, pooled = rewrite.pool_as_weight(graph)
        rewrites = rewrites + pooled
    return graph, tail, core, rewrites


def lower(graph: Graph, fused_stats: bool, external_gemm: bool, gemv: bool = False,
          eager_order: bool = False, defer_chain: bool = False) -> Lowered:
    """`fused_stats`: BatchNorm's column partials in the GEMM epilogue (fusion 2), else in a
    separate kernel; `defer_chain` (fusion 0): the point-wise chain after the Linear's output in
    a kernel of its own where the part has such a chain and no broadcast tail (deferred_store),
    else as fusion 1; `external_gemm`: cuBLAS computes z, stage 1's epilogue runs as a point-wise
    pass over it (and never fuses the partials); `gemv`: the row sum of the GEMM output as a
    matrix-vector product (rewrite.row_sum_of_gemm must apply); `eager_order`: the GEMM is the
    one eager calls (cuBLAS in fp32), so row sums follow eager's order too (eager_sum.cuh). The
    rewrites are applied first (`rewritten`: the lowered graph's N is the pooled width where an
    average pooling became the GEMM's weight). A broadcast tail (split_tail) runs after the stages,
    from the core value they write."""
    traced = graph
    if graph.is_prologue:
        # Ops on the module's input before its first GEMM (trace.Tracer.prologue): no GEMM, S is
        # the input itself, every op in stage 2 (a point-wise or a row kernel reading x).
        external_gemm, gemv, defer_chain = False, False, False
        _check_prologue(graph)
    graph, tail, core, rewrites = rewritten(graph)
    live = graph.live()
    params = [n for n in live if n.kind in OPERAND_KINDS]
    output = graph.node(graph.output)
    # A constant output reads the parameters of what rewrites dropped, for torch's NaN.
    by_path = {n.attrs["path"]: n for n in graph.params}
    for path in output.attrs.get("reads", ()) if output.kind == "const" else ():
        if path not in {p.attrs["path"] for p in params}:
            params.append(by_path[path])
    for n in tail:
        if n.kind in OPERAND_KINDS and n.attrs["path"] not in {p.attrs["path"] for p in params}:
            params.append(n)
    if len(params) > MAX_OPERANDS:
        raise Unsupported(f"the module reads {len(params)} parameters in its epilogue; kgen "
                          f"supports up to {MAX_OPERANDS}")
    operands = {n.attrs["path"]: k for k, n in enumerate(params)}
    bns = graph.batchnorms
    if gemv or output.kind == "const":
        # No GEMM: stage plans that name the structs the forward pass names, and run nothing.
        trivial = [StagePlan(graph.gemm.id, False, STAGE2_NONE,
                             _epilogue_struct(name, graph, operands, graph.gemm.id, True, False),
                             _stage2_struct(name, STAGE2_NONE, None, None)) for name in ("Train", "Eval")]
        structs = [_bn_input_struct(graph, operands), trivial[0].epilogue_cuda, trivial[0].stage2_cuda,
                   trivial[1].epilogue_cuda, trivial[1].stage2_cuda, KEEP_Z_IS_EVAL]
    if output.kind == "const":
        if bns:
            raise Unsupported(f"line {output.line}: the output is a constant, but BatchNorm1d "
                              "still updates its running statistics; kgen does not run a GEMM for "
                              "the statistics alone")
        structs += [_affine_struct("GemvAffine", "(not used: no matrix-vector rewrite)", graph, operands, []),
                    GEMV_ROWS_STUB, _tail_struct(traced, operands, tail, core),
                    constant_reads_struct(graph, output, operands)]
        return Lowered(graph, params, None, graph.output_level(), trivial[0], trivial[1],
                       "\n\n".join(structs), rewrites, tail=tail, traced=traced,
                       constant=output.attrs["value"])
    if gemv:
        row_sum = rewrite.row_sum_of_gemm(graph)
        if row_sum is None:
            raise Unsupported("the matrix-vector rewrite (backend gemv) does not apply to this module: it "
                              "needs a module whose GEMM output is only summed over its features "
                              "(after per-feature scales and shifts); use a GEMM backend (kgen, "
                              "wgmma, cublas)")
        rewrites = rewrites + [f"line {row_sum.reduce.line}: {row_sum.reduce.op} over the features of "
                               "x W^T (scaled and shifted per feature) computed as x . (sum_n "
                               "scale_n W_n) + sum_n shift_n, a matrix-vector product (no GEMM)"]
        structs += [_affine_struct("GemvAffine", "The reduced value is scale[n] * (x . W_n) + "
                                   "shift[n] (kgen/ir/rewrite.py, row_sum_of_gemm).", graph,
                                   operands, row_sum.steps),
                    _gemv_rows_struct(graph, operands, row_sum.reduce),
                    _tail_struct(traced, operands, tail, core), CONSTANT_READS_STUB]
        return Lowered(graph, params, None, graph.output_level(), trivial[0], trivial[1],
                       "\n\n".join(structs), rewrites, gemv=True, tail=tail, traced=traced)
    fused = fused_stats and not external_gemm
    eager_sums = eager_order and any(is_torch_sum(n) for n in live)
    # (fusion0_moves asks the same: no broadcast tail.)
    deferred = deferred_store(graph) if defer_chain and not tail and not external_gemm else None
    train = _plan("Train", graph, operands, True, fused, eager_sums, deferred)
    evaluation = _plan("Eval", graph, operands, False, fused, eager_sums, deferred)
    # BnInput first: an epilogue that takes BatchNorm's statistics asks it for their value (stat).
    structs = [_bn_input_struct(graph, operands), train.epilogue_cuda, train.stage2_cuda,
               evaluation.epilogue_cuda, evaluation.stage2_cuda]
    # The epilogue of the forward that keeps z for a point-wise backward (kernels/
    # entry_backward.cuh): the whole chain, the output made in one pass with z kept beside it.
    # A point-wise prologue's chain is all stage 2's (its stage-1 epilogue is the identity), as a
    # deferred chain's is: KeepZ is then the whole chain written out (KeepZEpilogue = EvalEpilogue
    # made its training forward return x itself: session 62's call C). A prologue of a row op keeps
    # z otherwise (a staged backward), and names no KeepZ of its own.
    if deferred is None and not (graph.is_prologue and evaluation.stage2 == STAGE2_POINTWISE):
        structs.append(KEEP_Z_IS_EVAL)
    else:
        structs.append("// The whole chain, for the forward that keeps z (its stage-2 kernel is for the others).\n"
                       + _epilogue_struct("KeepZ", graph, operands, graph.output, True, False))
    # Structs the forward pass names whichever path it takes.
    structs += [_affine_struct("GemvAffine", "(not used: no matrix-vector rewrite)", graph, operands, []),
                GEMV_ROWS_STUB, _tail_struct(traced, operands, tail, core), CONSTANT_READS_STUB]
    return Lowered(graph, params, bns[0].attrs["module"] if bns else None, graph.output_level(),
                   train, evaluation, "\n\n".join(structs), rewrites, tail=tail, traced=traced,
                   eager_sums=eager_sums, deferred_chain=deferred is not None)
