"""Backward kernels of a GEMM part, generated from its IR (kernels/backward.cuh runs them).

So far: parts whose epilogue is point-wise (GEMM, parameters per feature or of one element,
constants and point-wise ops: issue 9's chains, a chain's inner parts). `Backward::apply`
recomputes the forward values of one element from z, then walks the nodes in reverse with each
op's VJP from kgen.derivatives (the formulas the CPU tests check against torch.autograd, through
kgen.autodiff's reverse mode over the same IR), and returns dz and each parameter's gradient
contribution; kernels/backward.cuh sums the contributions per column. Every other node kind has
no backward kernel yet: `unsupported` names the first one, and the emitted file's backward()
raises with that message.
"""

from __future__ import annotations

from .derivatives import cuda_vjp
from .lower import Emitter, Lowered

BACKWARD_KINDS = ("gemm", "param", "const", "pointwise")
BACKWARD_LEVELS = ("tile", "col", "scalar")


def unsupported(lowered: Lowered, external_gemm: bool) -> str | None:
    """Why this part has no backward kernel yet (None: it has one)."""
    if external_gemm:
        return "no backward kernel for a cuBLAS GEMM yet (the backward GEMMs are kgen's own)"
    if lowered.gemv or lowered.constant is not None:
        return "no backward kernel yet for a module whose GEMM a rewrite removed"
    if lowered.tail:
        return "no backward kernel for a broadcast tail yet"
    for n in lowered.graph.live():
        if n.kind not in BACKWARD_KINDS or n.level not in BACKWARD_LEVELS:
            what = {"reduce": f"a row {n.op}", "pool": f"{n.op} pooling"}.get(n.kind, n.kind)
            at = f" (line {n.line}: `{n.text}`)" if n.line else ""
            return f"no backward kernel for {what} yet{at}"
    return None


def operand_index(lowered: Lowered) -> dict[str, int]:
    return {n.attrs["path"]: k for k, n in enumerate(lowered.operands)}


def backward_struct(lowered: Lowered) -> str:
    """struct Backward: dz and the parameters' contributions of one element (see the module
    docstring); `lowered` must be supported."""
    graph = lowered.graph
    operands = operand_index(lowered)
    live = graph.live()
    forward = Emitter(graph, operands, {graph.gemm.id: "z"}, bn_ready=True, element=True)
    value = {n.id: forward.get(n.id) for n in live}
    lines = list(forward.lines)
    adjoint = {n.id: f"d{n.id}" for n in live if n.kind != "const"}
    lines += [f"float {adjoint[n.id]} = {'g' if n.id == graph.output else '0.0f'};"
              for n in live if n.id in adjoint]
    for n in reversed(live):
        if n.kind != "pointwise":
            continue
        grads = cuda_vjp(n.op, adjoint[n.id], value[n.id], [value[a] for a in n.args], n.attrs)
        for a, grad in zip(n.args, grads):
            if grad is not None and a in adjoint:
                lines.append(f"{adjoint[a]} += {grad};")
    # A supported part has no tail, so its operands are exactly its live parameters: every c[k]
    # is written.
    params = [n for n in live if n.kind == "param"]
    assert sorted(operands[n.attrs["path"]] for n in params) == list(range(len(lowered.operands)))
    scalar = [False] * len(lowered.operands)
    for n in params:
        k = operands[n.attrs["path"]]
        lines.append(f"c[{k}] = {adjoint[n.id]};")
        scalar[k] = n.level == "scalar"
    body = "\n".join(f"    {line}" for line in lines)
    flags = ", ".join("true" if s else "false" for s in scalar) or "false"
    return f"""// The backward of the epilogue (kgen/backward.py): dz of one element from z and g = dL/dout,
// and each parameter's gradient contribution c[k] (summed over rows; over all elements for a
// one-element parameter, kScalar[k]).
struct Backward {{
  static constexpr int kParams = {len(lowered.operands)};
  static constexpr bool kScalar[{max(1, len(lowered.operands))}] = {{{flags}}};
  __device__ static __forceinline__ float apply(float z, float g, int m, int n, const kgen::EpilogueParams& p,
                                                float* c) {{
    (void)m; (void)n; (void)p; (void)c;
{body}
    return {adjoint[graph.gemm.id]};
  }}
}};"""


def grad_expressions(lowered: Lowered) -> list[str]:
    """Python expressions of each operand's gradient from `cols` (the backward's [P][N]
    column sums; a one-element parameter's total is at [k][0]) and `operandK` (its shape)."""
    out = []
    for k, n in enumerate(lowered.operands):
        row = f"cols[{k}, :1]" if n.level == "scalar" else f"cols[{k}]"
        out.append(f"{row}.reshape(operand{k}.shape)")
    return out
