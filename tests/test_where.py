"""torch.where with a comparison as its condition (kgen.ir.ops' `where` of (lhs, rhs, a, b)).

CPU tier: each spelling traces to one `where` node (the comparison no value of its own); the
IR's torch oracle matches the module itself, in fp64, at NaN, infinities and ties included; the
oracle's gradients (kgen.ir.autodiff) are torch.autograd's; uses kgen cannot compute are
refused, naming what; the emitted file constructs (imported alone), carries backward kernels and
passes the static rules; nvcc compiles its CUDA for sm_90a. GPU tier (`-m gpu`): the emitted
file's output and gradients against fp64 (kgen.check.validate's checks).
"""

import ast
import copy

import pytest
import torch

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported
from kgen.lower import backward
from kgen.tune.spec import Spec, Tile

from conftest import module_source, nvcc_prefetch, prefetch_dir, sm90a_check

N = 64
SMALL = {"batch": 8, "in_features": 16, "out_features": N}
PARAMS = {"threshold": "nn.Parameter(torch.randn(out_features) * 0.1)",
          "t": "nn.Parameter(torch.randn(1) * 0.1)",
          "bias2": "nn.Parameter(torch.randn(out_features))",
          "limit": "0.25"}
WGMMA_TILE = Tile(128, 128, 32, 16, 128, stages=4)
MMA_TILE = Tile(128, 128, 32, 64, 32, stages=3)

# name -> (body, the comparison, whether the output is a row value). Spellings from the issue and
# beyond: function, method, operands swapped, every comparison, parameters (per column, one
# element), constants, a Python attribute, zeros_like, in a row kernel's chain.
SPELLINGS = {
    "leaky_by_hand": ("x = torch.where(x > 0, x, 0.1 * x)", "gt"),
    "method": ("y = torch.tanh(x)\nx = x.where(x > 0, y)", "gt"),
    "zeros_like_param": ("x = torch.where(x >= self.threshold, x, torch.zeros_like(x))", "ge"),
    "lt_one_element": ("x = torch.where(x < self.t, x * 2.0, x + self.bias2)", "lt"),
    "le_constant_values": ("x = torch.where(x <= self.limit, 1.5, -0.5) * x", "le"),
    "swapped_operands": ("x = torch.where(0.3 < x, torch.sigmoid(x), x)", "gt"),
    "torch_gt": ("x = torch.where(torch.gt(x, self.threshold), x, self.bias2)", "gt"),
    "method_comparison": ("x = torch.where(x.ge(0.0), x, torch.full_like(x, -1.0))", "ge"),
    "eq": ("x = torch.relu(x)\nx = torch.where(x == 0, self.bias2, x)", "eq"),
    "ne": ("x = torch.where(x != x, 0.0, x)", "ne"),
    "before_softmax": ("x = torch.where(x > 0, x, x * 0.2)\nx = torch.softmax(x, dim=1)", "gt"),
    "after_row_sum": ("r = x.sum(dim=1, keepdim=True)\nx = torch.where(x > r / 64, x - r, x)\nx = x.mean(dim=1, keepdim=True)", "gt"),
}


def where_module(tmp_path, name: str) -> Reference:
    body, _ = SPELLINGS[name]
    path = tmp_path / f"where_{name}.py"
    path.write_text(module_source(body, PARAMS, N))
    return Reference(path, SMALL)


def inputs(k: int = 16) -> torch.Tensor:
    torch.manual_seed(3)
    return torch.rand(SMALL["batch"], k, dtype=torch.float64) * 2 - 1


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_where_traces_to_one_node_and_its_oracle_is_the_module(name, tmp_path):
    ref = where_module(tmp_path, name)
    graph = trace(ref)
    (w,) = [n for n in graph.live() if n.kind == "pointwise" and n.op == "where"]
    assert w.attrs["compare"] == SPELLINGS[name][1] and len(w.args) == 4
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = inputs()
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x, model), model(x), rtol=1e-12, atol=1e-12)


def test_the_spelling_of_a_comparison_does_not_change_the_ir(tmp_path):
    """x > 0, 0 < x, torch.gt(x, 0), x.gt(0), torch.greater(x, 0): one IR."""
    described = set()
    for i, cond in enumerate(["x > 0", "0 < x", "torch.gt(x, 0)", "x.gt(0)", "torch.greater(x, 0)", "x.__gt__(0)"]):
        path = tmp_path / f"spell{i}.py"
        path.write_text(module_source(f"x = torch.where({cond}, x, 0.1 * x)", {}, N))
        described.add(trace(Reference(path, SMALL)).describe())
    assert len(described) == 1, described


def test_the_oracle_follows_torch_at_nan_infinities_and_ties():
    from kgen.ir.ops import torch_apply

    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, 1.0], dtype=torch.float32)
    y = torch.arange(7, dtype=torch.float32)
    for compare, cond in [("gt", x > 0.5), ("ge", x >= 0.5), ("lt", x < 0.5), ("le", x <= 0.5),
                          ("eq", x == 0.0), ("ne", x != x)]:
        got = torch_apply("where", [x, 0.5 if compare != "eq" else 0.0, x, y] if compare != "ne" else [x, x, x, y],
                          {"compare": compare})
        torch.testing.assert_close(got, torch.where(cond, x, y), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(SPELLINGS))
@pytest.mark.parametrize("training", [True, False])
def test_where_gradients_are_torch_autograd(name, training, tmp_path):
    ref = where_module(tmp_path, name)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = inputs().requires_grad_()
    y = model(x)
    g = torch.randn_like(y)
    params = dict(model.named_parameters())
    expect = torch.autograd.grad(y, [x, *params.values()], g, allow_unused=True)
    with torch.no_grad():
        dx, grads = graph_vjp(graph, x.detach(), twin, g)
    torch.testing.assert_close(dx, expect[0], rtol=1e-10, atol=1e-12)
    for (path, _), e in zip(params.items(), expect[1:]):
        if e is None:   # read by a comparison alone, or not at all: torch gives it none, nor kgen
            assert path not in grads, path
        else:
            torch.testing.assert_close(grads[path], e, rtol=1e-10, atol=1e-12, msg=path)


@pytest.mark.parametrize("body, message", [
    ("x = (x > 0) * 2", "of comparisons alone"),
    ("x = (x > 0).sum(1, keepdim=True) * x", "sum of a comparison"),
    ("x = x > 0", "returns something other than one tensor"),
    ("x = torch.where(torch.sigmoid(x), x, 0.0)", "condition is not a comparison"),
    ("x = torch.where(x > 0)", "of one argument"),
    ("x = torch.zeros_like(x).sum(dim=1, keepdim=True)", "zeros_like / ones_like / full_like used other"),
    # (a (batch, 1) value broadcast to (batch, N) by the zeros_like, returned: as an operand of a
    # point-wise op it is taken since session 58, tests/test_spellings_probe58_epilogue.py)
    ("r = x.sum(dim=1, keepdim=True)\nx = torch.where(r > 0, r, torch.zeros_like(x))",
     r"full_like of a larger one\) used other than as an operand"),
    ("x = torch.where(x > 0, x, torch.zeros_like(x, dtype=torch.float64))", "with dtype"),
])
def test_uses_kgen_cannot_compute_are_refused(body, message, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(module_source(body, {}, N))
    with pytest.raises(Unsupported, match=message):
        trace(Reference(path, SMALL))


@pytest.mark.parametrize("name", ["leaky_by_hand", "zeros_like_param", "lt_one_element", "before_softmax",
                                  "after_row_sum"])
def test_the_emitted_file_constructs_and_has_backward_kernels(name, tmp_path):
    from test_render import exec_file

    ref = where_module(tmp_path, name)
    spec = Spec.of(str(ref.path), 64, 16, N, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    (low,) = generator.lowered_parts(spec)
    assert backward.unsupported(low) is None
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    assert "backward:  kgen kernels" in text
    module = exec_file(text, f"where_{name}")
    torch.manual_seed(1)
    new = module.ModelNew(*ref.init_args())
    torch.manual_seed(1)
    old = ref.Model(*ref.init_args())
    assert list(new.state_dict()) == list(old.state_dict())
    for key, value in old.state_dict().items():
        assert torch.equal(new.state_dict()[key], value), key


def compiled_spec(folder, name: str, backend: str) -> Spec:
    return Spec.of(str(where_module(folder, name).path), 64, 16, N, math="tf32x3", backend=backend, fusion=1,
                   tile=WGMMA_TILE if backend == "wgmma" else MMA_TILE)


# (nvcc starts at collection, conftest.nvcc_prefetch; the source does not depend on the folder.)
@nvcc_prefetch(lambda p: sm90a_check(generator.render_cuda_source(
    compiled_spec(prefetch_dir("where", p), p["name"], p["backend"]))))
@pytest.mark.parametrize("name, backend", [("zeros_like_param", "wgmma"), ("lt_one_element", "kgen"),
                                           ("after_row_sum", "wgmma")])
def test_the_emitted_cuda_compiles_for_sm90a(name, backend, tmp_path):
    """A where in the GEMM epilogue and struct Backward (point-wise), and in the row kernel and
    BackwardRows (after a row sum)."""
    from test_compile import NVCC, SM90A, compile_check, spills

    spec = compiled_spec(tmp_path, name, backend)
    source = generator.render_cuda_source(spec)
    (low,) = generator.lowered_parts(spec)
    compare = {"zeros_like_param": ">=", "lt_one_element": "<", "after_row_sum": ">"}[name]
    assert f") {compare} (" in low.cuda and f") {compare} (" in backward.backward_struct(low)
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source, (SM90A,))) == []


def test_a_where_keeps_the_splits_infinities_and_a_chain_without_one_does_not(tmp_path):
    """The tf32x3 split keeps infinities (KGEN_SPLIT_KEEPS_INFINITIES) where a where could turn
    the fast split's NaN of an infinite product into a number (eager: inf >= t picks inf; NaN >= t
    picks the zeros), and only there: it costs the GEMM 3-4 %."""
    from kgen.lower.forward import split_keeps_infinities

    keeps = "#define KGEN_SPLIT_KEEPS_INFINITIES 1"
    ref = where_module(tmp_path, "zeros_like_param")
    assert split_keeps_infinities(trace(ref))
    spec = Spec.of(str(ref.path), 64, 16, N, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    assert keeps in generator.render_cuda_source(spec)
    # an fp16x3 file's tf32x3 GEMMs (a part whose K is not a multiple of 8, its backward's)
    odd_k = Spec.of(str(ref.path), 64, 12, N, math="fp16x3", backend="wgmma", fusion=1,
                    tile=Tile(128, 128, 32, 16, 128, stages=3))
    assert "WgmmaWsF16x3Gemm" not in generator.gemm_type(odd_k, 12) and keeps in generator.render_cuda_source(odd_k)
    # a bf16 / TF32 file splits nothing
    assert keeps not in generator.render_cuda_source(
        Spec.of(str(ref.path), 64, 16, N, math="tf32", backend="wgmma", fusion=1, tile=WGMMA_TILE))
    plain = tmp_path / "plain.py"
    plain.write_text(module_source("x = torch.sigmoid(x) * self.bias2\nx = torch.clamp(x, 0.1, 0.9)", PARAMS, N))
    assert not split_keeps_infinities(trace(Reference(plain, SMALL)))
    assert keeps not in generator.render_cuda_source(
        Spec.of(str(plain), 64, 16, N, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE))


BOOL_MASKS = {
    "masked_fill": "x = x.masked_fill(self.mask, float('-inf')).softmax(dim=1)",
    "where_buffer": "x = torch.where(self.mask, x, torch.zeros_like(x))",
    "not_buffer": "x = torch.where(~self.mask, x, 0.1 * x)",
    "and_comparison": "x = x.masked_fill(self.mask & (x > 0), 0.0)",
}
# (the IR holds no bools: a bool buffer is a condition, mask > 0.5 of it read as 1 and 0, or a
# number, 1 and 0, as torch promotes it)


def bool_mask_module(tmp_path, name: str) -> Reference:
    path = tmp_path / f"mask_{name}.py"
    path.write_text(module_source(BOOL_MASKS[name], {}, N).replace(
        "    def forward", "        self.register_buffer('mask', torch.arange(out_features) % 3 == 0)\n\n    def forward", 1))
    return Reference(path, SMALL)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", sorted(BOOL_MASKS))
def test_a_bool_buffer_is_a_condition(name, training, tmp_path):
    """A bool buffer as a condition (masked_fill, torch.where, ~, &) is the comparison mask > 0.5
    of it read as 1 and 0; the oracle is the module in fp64, and the emitted forward hands the
    kernels the buffer in x's dtype."""
    from test_ir import check_oracle

    ref = bool_mask_module(tmp_path, name)
    graph = check_oracle(ref, training)
    (mask,) = [n for n in graph.live() if n.kind == "param" and n.attrs["path"] == "mask"]
    assert mask.attrs["bool"] and mask.level == "col"
    text = generator.render(Spec.of(str(ref.path), 64, 16, N, math="tf32x3", backend="wgmma", fusion=1,
                                    tile=WGMMA_TILE))
    assert "_kgen_checked_param(self.mask.to(x.dtype), x, (n,), 'mask', autocast)" in text


@pytest.mark.parametrize("body", ["x = x * self.mask", "x = torch.relu(x) + self.mask"])
def test_a_bool_buffer_as_a_number_is_1_and_0(body, tmp_path):
    """x * mask of a bool buffer: torch promotes it to x's dtype, and so do the oracle and the file."""
    from test_ir import check_oracle

    path = tmp_path / "mask_number.py"
    path.write_text(module_source(body, {}, N).replace(
        "    def forward", "        self.register_buffer('mask', torch.arange(out_features) % 3 == 0)\n\n    def forward", 1))
    graph = check_oracle(Reference(path, SMALL))
    assert [n.attrs.get("bool") for n in graph.live() if n.kind == "param" and n.attrs["path"] == "mask"] == [True]


# ---- GPU tier -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["leaky_by_hand", "zeros_like_param", "lt_one_element", "before_softmax",
                                  "after_row_sum"])
def test_gpu_where_output_and_gradients_against_fp64(name, tmp_path):
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import check_gradients, validate

    body, _ = SPELLINGS[name]
    path = tmp_path / f"where_{name}.py"
    path.write_text(module_source(body, PARAMS, 528))
    hopper = torch.cuda.get_device_capability() == (9, 0)
    for backend, tile in [("kgen", MMA_TILE)] + ([("wgmma", WGMMA_TILE)] if hopper else []):
        spec = Spec.of(str(path), 257, 300, 528, math="tf32x3", backend=backend, fusion=1, tile=tile)
        f = EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))
        results = validate(f, tol=1e-4, quick=True)
        assert all(r.passed for r in results), [r.line() for r in results if not r.passed]
        r = check_gradients(f, torch.device("cuda"), 1e-4, 257, True)
        assert r.passed, f"{backend}: {r.detail}"
