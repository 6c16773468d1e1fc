"""Reverse mode over the epilogue IR: the vector-Jacobian product of every node kind.

`graph_vjp(graph, x, model, grad)` returns the gradients of a module's input and of every
parameter the graph reads, given the gradient of its output, computed node by node from the
values of the forward pass (`Graph.part_values`), in torch. It is the oracle (and the
specification) of the backward kernels kgen generates: each node kind's rule here is the one a
backward stage implements, and the CPU tests check every rule, through whole modules, against
torch.autograd of the module itself.

The rules, by node kind (g: the gradient of the node's value; values broadcast as in the
forward pass, so a gradient is summed over the dimensions its operand was broadcast along):

    gemm       z = x Wᵀ: dx = dz W, dW = dzᵀ x (the two backward GEMMs)
    pointwise  the op's VJP from kgen.ir.derivatives (torch's own formulas)
    reduce     sum: g to every column; mean: g / width; max, min: g shared evenly among the
               columns equal to the result (torch.amax's rule; torch.max(dim) sends it to the
               one index it returned, which differs only on ties)
    batchnorm  batch statistics: dx = (a / M) (M ĝ − Σ ĝ − x̂ Σ ĝ x̂) with ĝ = g, a = γ / σ,
               dγ = Σ g x̂, dβ = Σ g (column sums over the batch); running statistics
               (eval): dx = a g, dγ = Σ g (x − μ) / σ, dβ = Σ g
    groupnorm  the same within each group of each row (mean over the group's n = N / G
               columns), with ĝ = γ g; dγ, dβ are column sums over the batch
    pool       max: g to the first maximum of each window (torch's index); avg: g / k to each
               tap; overlapping windows add up
    half       g to its columns of the input, zeros to the other half's
    mask       none (Dropout's mask is drawn, not computed: the dropout's mul gives g * mask)
    input      the module's input read after the GEMM: g summed to its shape, added to the
               input's gradient (none when detached); an extra input's (get_inputs()' tensor k
               after the input) is its own, under its operand path "<input k>"
    param      the sum of its uses' gradients, reduced to its shape
    const      none
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kgen.ir.derivatives import torch_vjp
from kgen.ir.graph import gemm_weight, module_tensor, side_by_side_parts, window_means, INPUT_PATH, Graph, Node


def _sum_to(grad: torch.Tensor, shape: tuple) -> torch.Tensor:
    """grad summed over the dimensions broadcasting added or stretched to reach its shape."""
    shape = tuple(shape)
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for d, size in enumerate(shape):
        if size == 1 and grad.shape[d] != 1:
            grad = grad.sum(d, keepdim=True)
    return grad.reshape(shape)


def _param_tensor(model: torch.nn.Module, path: str) -> torch.Tensor:
    return module_tensor(model, path)


def _accumulate_param(grads: dict, model: torch.nn.Module, path: str, g: torch.Tensor) -> None:
    """Adds g, the gradient of the parameter at `path` in its own shape, to `grads`: split back
    into each tensor's where the path names side-by-side Linears' biases (graph.side_by_side_path),
    as autograd splits torch.cat's."""
    parts = side_by_side_parts(path)
    if parts is None:
        _accumulate(grads, path, g)
        return
    sizes = [module_tensor(model, p).shape[0] for p in parts]
    for p, piece in zip(parts, g.split(sizes)):
        _accumulate(grads, p, piece)


def _accumulate(grads: dict, key, value) -> None:
    grads[key] = value if key not in grads else grads[key] + value


def _normalized(t: torch.Tensor, dim: int, eps: float, mean=None, var=None):
    """(x̂, 1/σ) of t over `dim` (keepdim), from its own biased statistics unless given."""
    if mean is None:
        mean = t.mean(dim, keepdim=True)
        var = ((t - mean) ** 2).mean(dim, keepdim=True)
    inv_std = 1.0 / torch.sqrt(var + eps)
    return (t - mean) * inv_std, inv_std


def _normalize_vjp(g_hat: torch.Tensor, x_hat: torch.Tensor, inv_std, dim: int) -> torch.Tensor:
    """The gradient of t through x̂ = (t − mean(t)) / σ(t) (biased), ĝ the gradient of x̂."""
    return inv_std * (g_hat - g_hat.mean(dim, keepdim=True)
                      - x_hat * (g_hat * x_hat).mean(dim, keepdim=True))


def _node_vjp(n: Node, g: torch.Tensor, values: dict, model: torch.nn.Module,
              params: dict) -> dict[int, torch.Tensor]:
    """The gradients node n sends to its arguments (by node id); the gradients of a module's
    own parameters (BatchNorm's γ, β, which are not graph nodes) go into `params` by path."""
    arg_values = [values[a] for a in n.args]
    if n.kind == "pointwise":
        # A rowflat (M,) result of (M, 1) operands: the op's own result was (M, 1).
        shape = torch.broadcast_shapes(*[v.shape for v in arg_values if isinstance(v, torch.Tensor)])
        g, y = g.reshape(shape), values[n.id].reshape(shape)
        out = {}
        for a, v, d in zip(n.args, arg_values, torch_vjp(n.op, g, y, arg_values, n.attrs)):
            if d is None:                       # no gradient flows (detach)
                continue
            if isinstance(v, torch.Tensor):     # (a Python number is a constant)
                _accumulate(out, a, _sum_to(d, v.shape))
        return out
    (inp,) = arg_values[:1]
    if n.kind == "reduce":
        width = inp.shape[1]
        g = g.reshape(inp.shape[0], 1)
        if n.op == "sum":
            return {n.args[0]: g.expand_as(inp).clone()}
        if n.op == "mean":
            return {n.args[0]: (g / width).expand_as(inp).clone()}
        mask = (inp == values[n.id].reshape(inp.shape[0], 1)).to(g.dtype)
        return {n.args[0]: g * mask / mask.sum(1, keepdim=True)}
    if n.kind == "batchnorm":
        bn = model.get_submodule(n.attrs["module"])
        batch_stats = bn.training or bn.running_mean is None
        if batch_stats:
            x_hat, inv_std = _normalized(inp, 0, bn.eps)
        else:
            x_hat, inv_std = _normalized(inp, 0, bn.eps, bn.running_mean, bn.running_var)
        gamma = bn.weight if bn.weight is not None else torch.ones_like(inv_std.reshape(-1))
        if bn.weight is not None:
            _accumulate(params, f"{n.attrs['module']}.weight", (g * x_hat).sum(0))
        if bn.bias is not None:
            _accumulate(params, f"{n.attrs['module']}.bias", g.sum(0))
        if batch_stats:
            return {n.args[0]: _normalize_vjp(g * gamma, x_hat, inv_std, 0)}
        return {n.args[0]: g * gamma * inv_std}
    if n.kind == "groupnorm":
        groups, rows = n.attrs["groups"], inp.shape[0]
        grouped = inp.reshape(rows, groups, -1)
        x_hat, inv_std = _normalized(grouped, 2, n.attrs["eps"])
        x_hat = x_hat.reshape(inp.shape)
        out = {}
        gamma = arg_values[1] if n.attrs["weight"] else torch.ones(inp.shape[1], dtype=inp.dtype)
        if n.attrs["weight"]:
            out[n.args[1]] = (g * x_hat).sum(0)
        if n.attrs["bias"]:
            out[n.args[1 + n.attrs["weight"]]] = g.sum(0)
        g_hat = (g * gamma).reshape(rows, groups, -1)
        out[n.args[0]] = _normalize_vjp(g_hat, x_hat.reshape(rows, groups, -1), inv_std, 2).reshape(inp.shape)
        return out
    if n.kind == "pool":
        k, s = n.attrs["kernel"], n.attrs["stride"]
        windows = inp.unfold(1, k, s)                       # (M, P, k)
        if n.op == "avg":
            taps = (g / k).unsqueeze(2).expand_as(windows)
        else:
            first = torch.nn.functional.one_hot(windows.argmax(2), k).to(g.dtype)   # first maximum
            taps = g.unsqueeze(2) * first
        grad = torch.zeros_like(inp)
        for tap in range(k):
            grad[:, tap: tap + s * (windows.shape[1] - 1) + 1: s] += taps[:, :, tap]
        return {n.args[0]: grad}
    if n.kind == "half":
        grad = torch.zeros_like(inp)
        grad.chunk(2, dim=1)[n.attrs["half"]].copy_(g)
        return {n.args[0]: grad}
    raise AssertionError(n.kind)


def part_vjp(graph: Graph, x: torch.Tensor, model: torch.nn.Module, grad: torch.Tensor,
             grads: dict, module_input: torch.Tensor | None = None, extra_inputs: tuple = ()) -> torch.Tensor:
    """Reverse mode over one GEMM part run on x (its GEMM input): adds the parameters'
    gradients to `grads` (by path; the gradient of the module's input read after the GEMM
    under the key INPUT_PATH, an extra input's under its own, input_path(k)) and returns the
    gradient of x."""
    values = graph.part_values(x, model, module_input, extra_inputs)
    if graph.output_tail:
        # torch's own op after the kernels (Graph.output_tail): its gradient by autograd
        rows = values[graph.output].detach().requires_grad_()
        with torch.enable_grad():
            grad, = torch.autograd.grad(graph.apply_tail(rows), rows, grad)
    adjoint: dict[int, torch.Tensor] = {graph.output: grad.reshape(values[graph.output].shape)}
    for n in reversed(graph.live()):
        g = adjoint.pop(n.id, None)
        if g is None or n.kind in ("const", "mask"):
            continue
        if n.kind == "input":
            if not n.attrs["detached"]:
                _accumulate(grads, n.attrs["path"], _sum_to(g, values[n.id].shape))
            continue
        if n.kind == "param":
            # Summed to the shape it was read as (a view of it, maybe), then in its own shape.
            own = _param_tensor(model, n.attrs["path"])
            g = _sum_to(g, n.attrs["shape"])
            if "pool" in n.attrs:   # read as its windows' means (rewrite.pool_as_weight): through them
                with torch.enable_grad():
                    leaf = own.detach().reshape(-1).requires_grad_()
                    g, = torch.autograd.grad(window_means(leaf, *n.attrs["pool"]), leaf, g.reshape(-1))
            _accumulate_param(grads, model, n.attrs["path"], g.reshape(own.shape))
        elif n.kind == "gemm" and n.attrs.get("identity"):
            return g   # (a prologue's z is its input: dx = dz)
        elif n.kind == "gemm":
            weight = gemm_weight(model, n)   # (N, K)
            dw = g.transpose(0, 1) @ x
            if n.attrs.get("weight_code"):
                # a weight the forward computes: dW through torch's ops to the parameters it reads
                with torch.enable_grad():
                    params = dict(model.named_parameters())
                    w = gemm_weight(model, n)
                    names = [k for k, p in params.items() if p.requires_grad]
                    found = torch.autograd.grad(w, [params[k] for k in names], dw, allow_unused=True)
                for k, d in zip(names, found):
                    if d is not None:
                        _accumulate(grads, k, d)
            else:
                _accumulate(grads, n.attrs["weight"], dw.t() if n.attrs.get("stored_kn") else dw)
            return g @ weight
        else:
            for a, d in _node_vjp(n, g, values, model, grads).items():
                _accumulate(adjoint, a, d)
    # No gradient reaches the GEMM (its output detached, or computed under torch.no_grad()):
    # torch gives x and W none; the kernels' dz is 0 (ModelNew's backward returns None for them:
    # Graph.gradient_reaches).
    return torch.zeros_like(x)


def graph_vjp(graph: Graph, x: torch.Tensor, model: torch.nn.Module,
              grad: torch.Tensor, *extra_inputs: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(the gradient of x, {parameter path: its gradient}) of the module `graph` was traced
    from, run on x (and get_inputs()' tensors after it, `extra_inputs`), for the output gradient
    `grad`; the gradient of extra input k is in the dict under input_path(k) where the module
    sends it one (none where it reads it detached, or not at all). Chained GEMMs: the parts in
    reverse order, each part's input gradient the previous part's output gradient."""
    # Each part's values are computed twice (its output for the next part, then again in
    # part_vjp): a Dropout's mask of an earlier part must be the one the forward drew, so each
    # part_vjp runs from the generator's state at its part's start, and the generator is left
    # where the forward leaves it (the second draw of a chain's first part was another mask).
    inputs, states = [x], []
    for part in graph.parts[:-1]:
        states.append(_rng_state(x))
        inputs.append(part.part_values(inputs[-1], model, x, extra_inputs)[part.output])
    states.append(_rng_state(x))
    grads: dict[str, torch.Tensor] = {}
    end = None
    for part, part_input, state in zip(reversed(graph.parts), reversed(inputs), reversed(states)):
        _set_rng_state(x, state)
        grad = part_vjp(part, part_input, model, grad, grads, module_input=x, extra_inputs=extra_inputs)
        end = end or _rng_state(x)
    _set_rng_state(x, end)
    if INPUT_PATH in grads:   # the module's input read after the GEMM too
        grad = grad + grads.pop(INPUT_PATH)
    return grad, grads


def _rng_state(like: torch.Tensor) -> tuple:
    """The state of the generator that draws a mask of `like`'s device (and the CPU's)."""
    cuda = torch.cuda.get_rng_state(like.device) if like.is_cuda else None
    return torch.get_rng_state(), cuda


def _set_rng_state(like: torch.Tensor, state: tuple) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], like.device)
