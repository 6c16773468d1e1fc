"""Gradients at the points where torch's autograd makes a choice (probe of session 54): NaN through
relu, and the divisor's gradient of a division by a tiny value (CPU).

Each module is generated: a Linear whose output z is chosen exactly (x = I, W = Zᵀ, b given), then
the op under test; the IR's gradients (graph_vjp) must be torch.autograd's of the module in fp64,
NaN where torch's are NaN. The derivatives are kgen.ir.derivatives', which the CUDA backward
kernels are written from (cuda_vjp), so these are the emitted file's rules too.

- relu: torch's backward is threshold_backward(g, y, 0), y <= 0 ? 0 : g, so a NaN element
  passes its gradient on to W and b (kgen's y > 0 ? g : 0 gave 0 there).
- div: torch's divisor gradient is -g ((a / b) / b); -g a / (b b) underflows b b to 0 where |b|
  is tiny (below ~1e-19 in fp32, 1e-154 in fp64) and gives NaN or inf where torch's is finite.
"""

import copy
import math
import textwrap

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.derivatives import torch_vjp
from kgen.ir.ops import torch_apply

NAN, INF = math.nan, math.inf

SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
{init}

    def forward(self, x):
        x = self.gemm(x)
{body}
        return x


batch_size = {batch}
in_features = {batch}
out_features = {n}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''


def module(tmp_path, body: str, z, init=()) -> Reference:
    batch, n = len(z), len(z[0])
    path = tmp_path / "ties.py"
    path.write_text(SOURCE.format(init="\n".join(f"        {line}" for line in init),
                                  body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8),
                                  batch=batch, n=n))
    return Reference(path)


def check_gradients(ref: Reference, z, bias, params=None):
    """The IR's gradients against torch.autograd, with the GEMM's output exactly z + bias."""
    graph = trace(ref)
    z = torch.tensor(z, dtype=torch.float64)
    model = ref.Model(*ref.init_args()).double()
    with torch.no_grad():
        model.gemm.weight.copy_(z.t())
        model.gemm.bias.copy_(torch.tensor(bias, dtype=torch.float64))
        for name, value in (params or {}).items():
            getattr(model, name).copy_(torch.tensor(value, dtype=torch.float64))
    twin = copy.deepcopy(model)
    x = torch.eye(z.shape[0], dtype=torch.float64).requires_grad_()
    y = model(x)
    g = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    names = [name for name, _ in model.named_parameters()]
    expect = torch.autograd.grad(y, [x, *model.parameters()], g, allow_unused=True)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x.detach(), twin), y.detach(), equal_nan=True)
        grad_x, grads = graph_vjp(graph, x.detach(), twin, g)
    torch.testing.assert_close(grad_x, expect[0], rtol=1e-12, atol=0, equal_nan=True)
    for name, e in zip(names, expect[1:]):
        got = grads.get(name)
        if e is None or got is None:
            assert e is None and got is None, name
            continue
        torch.testing.assert_close(got, e, rtol=1e-12, atol=0, equal_nan=True, msg=name)


# ---- relu at NaN -----------------------------------------------------------------------------
RELU_SPELLINGS = {
    "torch.relu": ("x = torch.relu(x)", ()),
    "F.relu": ("x = F.relu(x)", ()),
    "x.relu()": ("x = x.relu()", ()),
    "nn.ReLU": ("x = self.act(x)", ("self.act = nn.ReLU()",)),
    "relu then scale": ("x = torch.relu(x) * 2.0 + 1.0", ()),
}


@pytest.mark.parametrize("width", [3, 8])   # (torch's CPU kernel: scalar tail, vectorized)
@pytest.mark.parametrize("name", sorted(RELU_SPELLINGS))
def test_relu_passes_the_gradient_of_a_nan(name, width, tmp_path):
    body, init = RELU_SPELLINGS[name]
    z = [[0.0, 1.0, -1.0, 2.0, -2.0, 3.0, 0.5, -0.5][:width], [1.0, 0.0, 2.0, -3.0, 0.0, 1.0, -1.0, 4.0][:width]]
    bias = [NAN if j % 2 else 0.0 for j in range(width)]
    check_gradients(module(tmp_path, body, z, init), z, bias)


def test_relu_vjp_at_nan_is_torch_autograd():
    x = torch.tensor([NAN, 0.0, -0.0, -1.0, 2.0, INF, -INF], dtype=torch.float64, requires_grad=True)
    y = torch_apply("relu", [x])
    g = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], dtype=torch.float64)
    expect, = torch.autograd.grad(y, [x], g)
    got, = torch_vjp("relu", g, y.detach(), [x.detach()])
    torch.testing.assert_close(got, expect)
    assert got[0] == 1.0   # the NaN element passes its gradient (torch's threshold_backward)


# ---- div by a tiny value ---------------------------------------------------------------------
DIV_CASES = {
    # body, init, z, bias, params: z's first column is 1e-300 (its square underflows in fp64)
    "parameter / x": ("x = self.p / x", ("self.p = nn.Parameter(torch.ones(3))",),
                      [[1e-300, 1.0, 2.0], [1e-300, -1.0, 3.0]], [0.0, 0.0, 0.0], {"p": [1e-300, 0.0, 1.0]}),
    "0 / x": ("x = (x * 0.0) / x", (), [[1e-300, 1.0, 2.0], [-1e-300, -1.0, 3.0]], [0.0, 0.0, 0.0], None),
    "x / (x + c)": ("x = x / (x + 0.0)", (), [[1e-300, 1.0, 2.0], [1e-300, 1e-300, 3.0]], [0.0, 0.0, 0.0], None),
    "tanh(x) / x": ("x = torch.tanh(x) / x", (), [[1e-300, 1.0, 2.0], [-1e-300, 1e-300, 3.0]], [0.0, 0.0, 0.0], None),
}


@pytest.mark.parametrize("name", sorted(DIV_CASES))
def test_division_by_a_tiny_value_has_torchs_divisor_gradient(name, tmp_path):
    body, init, z, bias, params = DIV_CASES[name]
    check_gradients(module(tmp_path, body, z, init), z, bias, params)


@pytest.mark.parametrize("a, b", [(0.0, 1e-300), (-0.0, 1e-300), (1e-300, 1e-300), (1e-300, -1e-300),
                                  (1.0, 1e200), (1e300, 1e200), (2.0, 3.0), (0.0, 0.0), (1.0, 0.0)])
def test_div_vjp_is_torch_autograd_where_the_square_of_b_overflows_or_underflows(a, b):
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    y = torch_apply("div", [ta, tb])
    for gv in (1.0, -2.0):
        g = torch.tensor(gv, dtype=torch.float64)
        expect = torch.autograd.grad(y, [ta, tb], g, retain_graph=True)
        got = torch_vjp("div", g, y.detach(), [ta.detach(), tb.detach()])
        for e, r in zip(expect, got):
            torch.testing.assert_close(torch.as_tensor(r, dtype=torch.float64), e, rtol=1e-15, atol=0,
                                       equal_nan=True)


# ---- a 2-norm or a std of a zero row ---------------------------------------------------------
# torch's norm_backward and std_backward give 0 where the result is 0; kgen's norms end in
# norm_sqrt, whose gradient is 0 there (sqrt's is inf, and inf times the squares' 2 x = 0 was a
# NaN, which dW = dz^T x spread over every weight: a padded batch's zero row, F.normalize).
NORM_SPELLINGS = {
    "F.normalize": "x = F.normalize(x, dim=1)",
    "F.normalize, p=2, eps": "x = F.normalize(x, p=2.0, dim=-1, eps=1e-6)",
    "torch.norm": "x = x * torch.norm(x, dim=1, keepdim=True)",
    "x.norm": "x = x + x.norm(dim=1, keepdim=True)",
    "linalg.vector_norm": "x = torch.tanh(x) * torch.linalg.vector_norm(x, dim=1, keepdim=True)",
    "x / norm.clamp_min": "x = x / x.norm(p=2, dim=1, keepdim=True).clamp_min(1e-12)",
    "std": "x = x * x.std(dim=1, keepdim=True)",
    "std, unbiased=False": "x = x + torch.std(x, dim=1, keepdim=True, unbiased=False)",
}


@pytest.mark.parametrize("name", sorted(NORM_SPELLINGS))
def test_a_norm_or_std_of_a_zero_row_has_torchs_gradient(name, tmp_path):
    z = [[0.0, 0.0, 0.0, 0.0], [3.0, 0.0, -4.0, 0.0], [2.0, 2.0, 2.0, 2.0]]
    check_gradients(module(tmp_path, NORM_SPELLINGS[name], z), z, [0.0, 0.0, 0.0, 0.0])


def test_norm_sqrt_vjp_is_torchs_norm_backward_at_zero():
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    norm = torch.linalg.vector_norm(x, dim=1)
    g = torch.tensor([2.0, 5.0], dtype=torch.float64)
    expect, = torch.autograd.grad(norm, [x], g)
    squares = (x * x).sum(dim=1).detach()
    d_squares, = torch_vjp("norm_sqrt", g, torch_apply("norm_sqrt", [squares]), [squares])
    torch.testing.assert_close(d_squares[:, None] * 2 * x.detach(), expect)
    assert d_squares[0] == 0.0 and torch.isfinite(d_squares).all()


# ---- logsumexp of a row holding an infinity --------------------------------------------------
# torch's logsumexp shifts by the row's max only where that is finite (0 elsewhere): a row of
# -inf (log of a ReLU'd row that is all <= 0) gives -inf, and a row holding +inf (an exp that
# overflowed) gives +inf. x - max gave inf - inf there, NaN (the session 54 probe's finding).
LOGSUMEXP_CASES = {
    "a row of -inf": ("x = torch.logsumexp(torch.log(torch.relu(x)), dim=1, keepdim=True)",
                      [[-1.0, -2.0, 0.0], [1.0, -1.0, 2.0]]),
    "a row holding +inf": ("x = torch.logsumexp(torch.exp(x * 1000.0), dim=1)",
                           [[1.0, -2.0, 0.0], [0.1, -1.0, 0.2]]),
    "x.logsumexp(-1) of -inf and +inf rows": ("x = torch.log(torch.relu(x)).exp().mul(1e300).mul(1e300).log().logsumexp(-1)",
                                               [[-1.0, -2.0, 0.0], [1.0, -1.0, 2.0], [3.0, 0.5, -1.0]]),
}


@pytest.mark.parametrize("name", sorted(LOGSUMEXP_CASES))
def test_logsumexp_of_a_row_holding_an_infinity_is_torchs(name, tmp_path):
    body, z = LOGSUMEXP_CASES[name]
    ref = module(tmp_path, body, z)
    model = ref.Model(*ref.init_args()).double()
    with torch.no_grad():
        model.gemm.weight.copy_(torch.tensor(z, dtype=torch.float64).t())
        model.gemm.bias.zero_()
        y = model(torch.eye(len(z), dtype=torch.float64))
    assert torch.isinf(y).any() and not torch.isnan(y).any()   # (the case is what it says)
    check_gradients(ref, z, [0.0] * len(z[0]))
