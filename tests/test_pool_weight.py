"""AvgPool1d over the features of a Linear's output, computed as the Linear of W and b averaged
over the pooling's windows of rows (kgen/ir/rewrite.py, pool_as_weight): a GEMM of N / stride
rows (KernelBench 98: a sixteenth of the GEMM).

The modules are generated, spelling by spelling: the Linear as nn.Linear (with and without a
bias), F.linear, x @ W.t() + b, torch.addmm and a weight the forward computes; the pooling as
nn.AvgPool1d, F.avg_pool1d with positional and keyword sizes, windows that overlap and windows
that leave features over (floor mode). CPU: the lowered graph is the rewritten one, its oracle
gives the module's output and gradients in fp64, and the emitted file's weight and bias are the
means its header says; where the rewrite must not apply (a pooling of anything but x W^T + b,
max pooling, z read elsewhere), the graph keeps its pooling. GPU: the full gate in fp32, bf16
and fp16."""

import copy
import textwrap

import pytest
import torch

from kgen.codegen import generator
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import pooled_width
from kgen.lower.forward import lower
from kgen.tune.spec import Spec, Tile

from conftest import reference_text
from test_half_gpu import DTYPES as HALF


_PARAMS = ["self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)",
           "self.bias = nn.Parameter(torch.randn(out_features) / 8)"]
# The Linear, each way: (lines of __init__, the forward's line, whether it has a bias).
LINEARS = {
    "nn.Linear": (["self.fc = nn.Linear(in_features, out_features)"], "x = self.fc(x)", True),
    "nn.Linear(bias=False)": (["self.fc = nn.Linear(in_features, out_features, bias=False)"], "x = self.fc(x)", False),
    "F.linear": (_PARAMS, "x = F.linear(x, self.weight, self.bias)", True),
    "x @ W.t() + b": (_PARAMS, "x = x @ self.weight.t() + self.bias", True),
    "addmm": (_PARAMS, "x = torch.addmm(self.bias, x, self.weight.t())", True),
    "computed weight": (_PARAMS, "x = F.linear(x, self.weight * 0.5, self.bias)", True),
}
# The pooling, each way: (lines of __init__, the forward's line, kernel, stride).
POOLS = {
    "nn.AvgPool1d(4)": (["self.pool = nn.AvgPool1d(4)"], "x = self.pool(x.unsqueeze(1)).squeeze(1)", 4, 4),
    "F.avg_pool1d(x, 3, 2)": ([], "x = F.avg_pool1d(x.unsqueeze(1), 3, 2).squeeze(1)", 3, 2),
    "F.avg_pool1d(kernel_size=5, stride=5)":
        ([], "x = F.avg_pool1d(x.unsqueeze(1), kernel_size=5, stride=5).squeeze(1)", 5, 5),
}
AFTER = ["x = F.gelu(x) * 2.0", "x = torch.max(x, dim=1).values"]
# On the GPU without the scale: KernelBench's allclose at 1e-2 compares two bf16 results, and
# outputs near 4 (KernelBench 98's are below 1) hold a rounding step of 0.03 each (call C).
AFTER_GPU = ["x = F.gelu(x)", "x = torch.max(x, dim=1).values"]
N = 64   # (5 leaves 4 features outside every window; 3 every 2 gives 31 windows)


def source(init: list[str], body: list[str], out_features: int = N) -> str:
    return reference_text(init, body, out_features)


def pooled_module(linear: str, pool: str, after=AFTER) -> str:
    init, line, _ = LINEARS[linear]
    pool_init, pool_line, _, _ = POOLS[pool]
    return source(init + pool_init, [line, pool_line] + after)


def write(tmp_path, text: str, name: str = "ref") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return Reference(path, {})


def lowered(ref: Reference):
    return lower(trace(ref).parts[-1], False, False)


CASES = [(linear, pool) for linear in LINEARS for pool in POOLS]


@pytest.mark.parametrize("linear,pool", CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_the_pooling_becomes_the_gemms_weight(linear, pool, tmp_path):
    """The lowered graph has no pooling, its GEMM is the pooled width, and its oracle gives the
    module's output and every gradient (of x and of each parameter) in fp64."""
    ref = write(tmp_path, pooled_module(linear, pool))
    low = lowered(ref)
    _, _, kernel, stride = POOLS[pool]
    assert low.graph.pool is None
    assert low.graph.out_features == pooled_width(N, kernel, stride)
    assert any(f"AvgPool1d(kernel_size={kernel}, stride={stride})" in r for r in low.rewrites), low.rewrites

    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    twin = copy.deepcopy(model)
    x = (torch.rand(8, 16, dtype=torch.float64) * 2 - 1).requires_grad_()
    y = model(x)
    torch.testing.assert_close(low.graph.interpret(x.detach(), twin), y.detach(), rtol=1e-12, atol=1e-13)
    g = torch.randn_like(y)
    names = [name for name, _ in model.named_parameters()]
    expect = torch.autograd.grad(y, [x] + list(model.parameters()), g)
    with torch.no_grad():
        grad_x, grads = graph_vjp(low.graph, x.detach(), twin, g)
    torch.testing.assert_close(grad_x, expect[0], rtol=1e-10, atol=1e-12)
    for name, e in zip(names, expect[1:]):
        torch.testing.assert_close(grads[name], e, rtol=1e-10, atol=1e-12, msg=name)


# Modules whose pooling the rewrite must leave alone: (init, body).
AVG4 = "x = F.avg_pool1d(x.unsqueeze(1), 4).squeeze(1)"
KEPT = {
    "a pooling of tanh(z)": (LINEARS["nn.Linear"][0], ["x = torch.tanh(self.fc(x))", AVG4]),
    "a pooling of 2 z": (LINEARS["nn.Linear"][0], ["x = self.fc(x) * 2.0", AVG4]),
    "max pooling": (LINEARS["nn.Linear"][0] + ["self.pool = nn.MaxPool1d(4)"],
                    ["x = self.fc(x)", "x = self.pool(x.unsqueeze(1)).squeeze(1)"]),
    "BatchNorm before it": (LINEARS["nn.Linear"][0] + ["self.bn = nn.BatchNorm1d(out_features)"],
                            ["x = self.bn(self.fc(x))", AVG4]),
    "z read again": (LINEARS["nn.Linear"][0],
                     ["z = self.fc(x)", "x = F.avg_pool1d(z.unsqueeze(1), 4).squeeze(1) + z.amax(1, keepdim=True)"]),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_the_rewrite_leaves_other_poolings_alone(name, tmp_path):
    init, body = KEPT[name]
    low = lowered(write(tmp_path, source(init, body)))
    assert low.graph.pool is not None and low.graph.out_features == N
    assert not any("AvgPool1d" in r for r in low.rewrites), low.rewrites


def test_the_emitted_file_averages_w_and_b_as_its_header_says(tmp_path):
    """The file's weight method and bias operand are the windows' means of the module's own
    tensors (summed in fp64, rounded once), and dW and db reach the parameters through them."""
    from kgen.check.loading import EmittedFile

    ref_path = tmp_path / "ref.py"
    ref_path.write_text(pooled_module("nn.Linear", "F.avg_pool1d(x, 3, 2)"))
    spec = Spec.of(str(ref_path), 8, 16, N, "tf32x3", "wgmma", 1, Tile(128, 64, 32, 16, 64, stages=4))
    path = generator.write(spec, tmp_path / "new.py")
    text = path.read_text()
    assert "rewrite:   line" in text and "AvgPool1d(kernel_size=3, stride=2)" in text
    module = EmittedFile(path).module
    torch.manual_seed(0)
    model = module.ModelNew(16, N)
    w, b = model.fc.weight, model.fc.bias
    want_w = torch.stack([w[j * 2:j * 2 + 3].double().mean(0) for j in range(31)])
    # (summed in fp32: within a few of fp32's rounding steps of the fp64 mean)
    torch.testing.assert_close(model._kgen_weight0().double(), want_w, rtol=0, atol=4 * 2**-24 * want_w.abs().max().item())
    assert "self.fc.bias.unfold(0, 3, 2).mean(-1)" in text
    dw = torch.randn(31, 16)
    model._kgen_weight0().backward(dw)
    want = torch.zeros(N, 16)
    for j in range(31):
        want[j * 2:j * 2 + 3] += dw[j] / 3
    torch.testing.assert_close(w.grad, want)


# ---- GPU tier ----------------------------------------------------------------------------------
GPU_CASES = {"nn.Linear-nn.AvgPool1d(16)": ("nn.Linear", (["self.pool = nn.AvgPool1d(16)"],
                                                          "x = self.pool(x.unsqueeze(1)).squeeze(1)", 16, 16)),
             "F.linear-F.avg_pool1d(x, 3, 2)": ("F.linear", POOLS["F.avg_pool1d(x, 3, 2)"])}
GPU_SHAPE = (256, 520, 1024)   # M, K, N


@pytest.fixture(scope="module")
def pooled_files(tmp_path_factory):
    from kgen.tune.search import Candidate, build_all

    if not torch.cuda.is_available():
        return {}
    d = tmp_path_factory.mktemp("pool_weight")
    candidates = {}
    for name, (linear, (pool_init, pool_line, _, _)) in GPU_CASES.items():
        init, line, _ = LINEARS[linear]
        ref = d / f"{len(candidates)}.py"
        ref.write_text(source(init + pool_init, [line, pool_line] + AFTER_GPU, GPU_SHAPE[2]))
        spec = Spec.of(str(ref), *GPU_SHAPE, "tf32x3", "wgmma", 1, Tile(128, 64, 32, 16, 64, stages=4))
        candidates[name] = Candidate(spec, generator.write(spec, d / f"{spec.name()}.py"))
    for dtype in ("fp32", *HALF):
        build_all(list(candidates.values()), 16, 600, lambda line: None, dtype=dtype)
    return {name: c.path for name, c in candidates.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", *HALF])
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_the_full_gate_passes_a_pooled_weight(pooled_files, case, dtype):
    """kgen validate --dtype: every check (eval and training, gradients against fp64 with eager's
    error beside them, NaN / Inf / magnitudes, KernelBench's eval at its precision)."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import validate

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch_dtype = HALF.get(dtype, torch.float32)
    results = validate(EmittedFile(pooled_files[case]), tol=1e-4 if dtype == "fp32" else 1e-2, dtype=torch_dtype)
    for r in results:
        print(r.line())
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]


def _grad_fns(t: torch.Tensor) -> set[str]:
    names, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None:
            names.add(type(fn).__name__)
            stack.extend(f for f, _ in fn.next_functions)
    return names


@pytest.mark.parametrize("out_features", [64, 66])
def test_windows_that_cover_w_take_no_slice(out_features):
    """Where the windows cover every row, the means' autograd graph has no slice (its backward
    would write zeros over W and copy: 0.2 ms at 8192 x 8192, call E); where rows are left over,
    they get no gradient."""
    from kgen.ir.graph import window_means

    w = torch.randn(out_features, 8, dtype=torch.float64, requires_grad=True)
    means = window_means(w, 4, 4)
    assert ("SliceBackward0" in _grad_fns(means)) == (out_features % 4 != 0)
    torch.testing.assert_close(means, torch.stack([w[j * 4:j * 4 + 4].mean(0) for j in range(16)]))
    means.sum().backward()
    assert bool((w.grad[:64] == 0.25).all()) and bool((w.grad[64:] == 0).all())
