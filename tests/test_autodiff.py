"""The backward's oracle (CPU): every point-wise op's VJP from kgen.ir.derivatives matches
torch.autograd of the op's torch definition, and its CUDA form compiles; reverse mode over the
IR (kgen.ir.autodiff.graph_vjp) gives, for every module kgen synthesizes, the gradients
torch.autograd gives for the module itself: of the input and of every parameter, in training and
eval mode."""

import copy

import pytest
import torch

from kgen.ir.autodiff import graph_vjp
from kgen.ir.derivatives import DERIVATIVES, cuda_vjp, torch_vjp
from kgen.ir.ops import POINTWISE, torch_apply
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace

from conftest import SYNTHESIZED_REFS
from test_chain import CHAINS, chain_module
from test_ops import VARIANTS, compile_fp32_only, find_nvcc, operands_of, variant_id

SMALL = {"batch": 8, "in_features": 16, "out_features": 1024}


def test_every_op_has_a_derivative():
    assert set(DERIVATIVES) == set(POINTWISE)


def op_inputs(name: str) -> list[torch.Tensor]:
    """fp64 operands away from the op's kinks and outside its domain's edge (where torch and
    any formula may pick different subgradients), with some exactly at 0."""
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(4000, generator=g, dtype=torch.float64) - 0.5) * 16
    b = (torch.rand(4000, generator=g, dtype=torch.float64) - 0.5) * 16
    if name in ("log", "log2", "log10", "sqrt", "norm_sqrt", "rsqrt", "pow"):
        a = a.abs() + 0.1
    if name == "log1p":
        a = a.abs() - 0.9
    if name == "div":
        b = torch.where(b.abs() < 0.1, b + 0.5, b)
    if POINTWISE[name].arity == 4:   # where(a > b, a', b'): a', b' leaves of their own (a gradient per operand)
        return [a, b, a.clone(), b.clone()]
    return [a, b][:POINTWISE[name].arity]


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_vjp_is_torch_autograd(variant):
    name, attrs = variant
    operands = [t.requires_grad_() for t in op_inputs(name)]
    y = torch_apply(name, operands, attrs)
    g = torch.randn_like(y)
    if not y.requires_grad:     # detach: torch sends no gradient back, nor may kgen
        assert torch_vjp(name, g, y, operands, attrs) == (None,)
        return
    expect = torch.autograd.grad(y, operands, g, allow_unused=True)
    with torch.no_grad():
        got = torch_vjp(name, g, y.detach(), [o.detach() for o in operands], attrs)
    # torch's hardsigmoid backward multiplies by the fp32 constant 1/6 even in fp64; the
    # formula divides by 6 (as kgen's forward does).
    rtol = 1e-7 if name == "hardsigmoid" else 1e-12
    for e, r in zip(expect, got):
        if r is None:   # no gradient sent (where's comparison): torch sends none either
            assert e is None
            continue
        e = torch.zeros_like(operands[0]) if e is None else e
        # (NaN where torch's is NaN: pow of a negative base)
        # (to_float32's gradient is g itself, in y's float32: torch casts it back to the operand's
        # dtype, bookkeeping the backward kernels, all fp32, have no use for)
        torch.testing.assert_close(torch.broadcast_to(r, e.shape), e, rtol=rtol, atol=1e-12, equal_nan=True,
                                   check_dtype=name != "to_float32")


def test_kinks_follow_torch():
    """Where a derivative jumps, torch's choice: relu, hardtanh, clamp, abs, leaky_relu at the
    points where they bend."""
    cases = [("relu", {}, [0.0]), ("abs", {}, [0.0]), ("leaky_relu", {"negative_slope": 0.2}, [0.0]),
             ("hardtanh", {}, [-1.0, 1.0]), ("clamp", {"min": -1.0, "max": 2.0}, [-1.0, 2.0]),
             ("minimum_const", {"other": 0.5}, [0.5]), ("maximum_const", {"other": -0.25}, [-0.25]),
             ("elu", {}, [0.0]), ("hardswish", {}, [-3.0, 3.0]), ("hardsigmoid", {}, [-3.0, 3.0])]
    for name, attrs, points in cases:
        x = torch.tensor(points, dtype=torch.float64, requires_grad=True)
        y = torch_apply(name, [x], attrs)
        expect = torch.autograd.grad(y, [x], torch.ones_like(y))[0]
        got = torch_vjp(name, torch.ones_like(y), y.detach(), [x.detach()], attrs)[0]
        torch.testing.assert_close(torch.broadcast_to(got, expect.shape), expect, msg=name)


def test_cuda_vjps_compile(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    lines = []
    for k, (name, attrs) in enumerate(VARIANTS):
        operands = operands_of(name, ["a", "b"])
        for j, expr in enumerate(cuda_vjp(name, "g", "y", operands, attrs)):
            if expr is None:    # no gradient flows
                continue
            lines.append(f"__device__ float vjp_{k}_{j}(float g, float y, float a, float b) "
                         f"{{ (void)g; (void)y; (void)a; (void)b; return {expr}; }}")
    cu = tmp_path / "vjp.cu"
    cu.write_text("#include <math.h>\n" + "\n".join(lines) + "\n")
    compile_fp32_only(nvcc, cu, tmp_path)


def check_module_gradients(ref: Reference, training: bool, batch: int = 8, in_features: int = 16):
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = (torch.rand(batch, in_features, dtype=torch.float64) * 2 - 1).requires_grad_()
    # One seed before the module and before the oracle: a Dropout in training mode draws the
    # same mask in both (the oracle's mask node, ir.dropout_mask).
    torch.manual_seed(9)
    y = model(x)
    g = torch.randn_like(y)
    names = [name for name, p in model.named_parameters()]
    expect = torch.autograd.grad(y, [x] + list(model.parameters()), g, allow_unused=True)
    with torch.no_grad():
        torch.manual_seed(9)
        grad_x, grads = graph_vjp(graph, x.detach(), twin, g)
    torch.testing.assert_close(grad_x, expect[0], rtol=1e-9, atol=1e-10)
    for name, e in zip(names, expect[1:]):
        if e is None:
            assert name not in grads
            continue
        torch.testing.assert_close(grads[name], e, rtol=1e-9, atol=1e-10, msg=name)


@pytest.mark.parametrize("ref", SYNTHESIZED_REFS, ids=lambda p: p.stem)
@pytest.mark.parametrize("training", [True, False])
def test_module_gradients_are_torch_autograd(ref, training):
    check_module_gradients(Reference(ref, SMALL), training)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chained_gemm_gradients_are_torch_autograd(name, tmp_path):
    init, body, widths = CHAINS[name]
    check_module_gradients(chain_module(tmp_path, init, body, name), True, in_features=12)
