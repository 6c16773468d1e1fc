"""Values read per element that are not computed from the GEMM: Dropout's mask in training mode
(KernelBench level 2, 66: Linear -> Dropout -> softmax) and the module's input read again after
the GEMM (51: ... -> x + original_x).

CPU tier: torch draws the same mask for F.dropout of ones as for F.dropout of the real value
under one seed; the trace (mask and input nodes), the IR's torch oracle against the module in
training and eval mode under one seed, the lowering (where each is read), the emitted forward
(the mask drawn by torch, the input passed as an operand), the backward reading the mask as the
forward does (the input's read: tests/test_tail_backward.py), nvcc compile-only of
the CUDA (one compile per module). GPU tier (`-m gpu`): an emitted file in training mode matches
the reference in training mode under the same seed, and leaves torch's generator where the
reference leaves it; Dropout's gradients against fp64 in both modes (kgen.check.validate).
"""

import ast
import copy
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from kgen.ir import autodiff
from kgen.lower import backward
from kgen.codegen import generator
from kgen.lower import forward as lower
from kgen.ir.graph import Unsupported
from kgen.frontend.reference import Reference
from kgen.tune.spec import Spec, Tile
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace

from conftest import module_source, nvcc_prefetch, prefetch_dir, sm90a_check

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench" / "level2"
KB_DROPOUT = KERNELBENCH / "66_Matmul_Dropout_Softmax.py"
KB_RESIDUAL = KERNELBENCH / "51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py"
SMALL = {"batch": 8, "in_features": 16, "out_features": 1024}
WGMMA_TILE = Tile(128, 128, 32, 16, 128, stages=4)
MMA_TILE = Tile(128, 128, 32, 64, 32, stages=3)


def kernelbench(path: Path) -> Reference:
    if not path.is_file():
        pytest.skip(f"{path} is absent (KernelBench's level 2 is not checked out beside the project)")
    return Reference(path, SMALL)


def dropout_module(tmp_path, body: str, name: str = "ref.py") -> Reference:
    """A module with nn.Dropout(0.3) `drop`, nn.Dropout(0.5) `drop2` and a per-feature `bias2`."""
    path = tmp_path / name
    path.write_text(module_source(body, {"drop": "nn.Dropout(0.3)", "drop2": "nn.Dropout(0.5)",
                                         "bias2": "nn.Parameter(torch.randn(out_features))"},
                                  out_features=1024))
    return Reference(path, SMALL)


_RESIDUAL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.shift = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
{body}


batch_size = 8
in_features = {in_features}
out_features = {out_features}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''


def residual_module(tmp_path, body: str, in_features: int = 16, out_features: int = 1024) -> Reference:
    """A module whose forward is `body` (it reads its input x, calls self.gemm, returns)."""
    path = tmp_path / "residual.py"
    path.write_text(_RESIDUAL.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8),
                                     in_features=in_features, out_features=out_features))
    return Reference(path, {"batch": 8, "in_features": in_features, "out_features": out_features})


def check_oracle_seeded(ref: Reference, training: bool, seed: int = 3):
    """Graph.interpret against the module in fp64, both run right after torch.manual_seed(seed):
    a Dropout in training mode draws the same mask in both."""
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = torch.rand(SMALL["batch"], ref.input.shape[1], dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        torch.manual_seed(seed)
        expect = model(x)
        after_module = torch.rand(4, dtype=torch.float64)
        torch.manual_seed(seed)
        got = graph.interpret(x, twin)
        after_oracle = torch.rand(4, dtype=torch.float64)
    assert got.shape == expect.shape
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)
    # ... and the oracle consumed the generator exactly as the module did.
    assert torch.equal(after_module, after_oracle)
    return graph


# ---- the mask: torch's draw does not depend on the values --------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("shape", [(8, 1024), (7, 33), (128, 4096), (1, 5)])
def test_dropout_of_ones_draws_the_mask_dropout_of_the_value_draws(dtype, p, shape):
    x = torch.randn(*shape, dtype=dtype) * 10
    x[0, 0] = float("inf")
    torch.manual_seed(11)
    expect = F.dropout(x, p, True)
    after = torch.rand(3)
    torch.manual_seed(11)
    scaled_mask = F.dropout(torch.ones(*shape, dtype=dtype), p, True)
    assert torch.equal(torch.rand(3), after)
    # x * (mask * scale) is torch's x * mask * scale bit for bit (mask in {0, 1}), inf and 0 too.
    torch.testing.assert_close(x * scaled_mask, expect, rtol=0, atol=0, equal_nan=True)
    assert set(scaled_mask.unique().tolist()) <= {0.0, float(torch.tensor(1 / (1 - p), dtype=dtype))}


# ---- A: Dropout in training mode ------------------------------------------------------------
def test_kernelbench_66_dropout_is_a_mask_node_and_its_oracle_matches_in_both_modes():
    ref = kernelbench(KB_DROPOUT)
    for training in (True, False):
        graph = check_oracle_seeded(ref, training)
    (d,) = graph.dropouts
    assert d["reproduced"] and d["path"] == "dropout" and d["p"] == 0.2
    (mask,) = [n for n in graph.nodes if n.kind == "mask"]
    assert mask.level == "tile" and mask.attrs["module"] == "dropout"
    assert any(n.op == "mul" and mask.id in n.args for n in graph.live())


DROPOUTS = [
    # the mask read by the GEMM epilogue (point-wise chain)
    "x = self.drop(x)\nx = torch.relu(x) * 2.0 + self.bias2",
    # the mask read by stage 1, a softmax after it (66's form)
    "x = self.drop(x + self.bias2)\nx = torch.softmax(x, dim=1)",
    # the mask read in the row kernel (after a row reduction)
    "x = x - x.mean(dim=1, keepdim=True)\nx = self.drop(x)\nx = torch.log_softmax(x, dim=1)",
    # two dropouts: drawn in trace order
    "x = self.drop(x)\nx = torch.tanh(x)\nx = self.drop2(x) + self.bias2",
    # the functional form following the model's mode
    "x = F.dropout(x, 0.4, training=self.training)\nx = torch.sigmoid(x).sum(dim=1, keepdim=True)",
]


@pytest.mark.parametrize("body", DROPOUTS, ids=range(len(DROPOUTS)))
def test_dropout_modules_oracle_matches_the_module_under_one_seed(body, tmp_path):
    ref = dropout_module(tmp_path, body)
    for training in (True, False):
        graph = check_oracle_seeded(ref, training)
    assert all(d["reproduced"] for d in graph.dropouts) and graph.dropouts
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    masks = [k for k, n in enumerate(low.operands) if n.kind == "mask"]
    assert len(masks) == len(graph.dropouts)
    # The backward reads each mask as the forward does (the dropout's mul sends g * mask * scale
    # back; in eval mode nullptr, the identity) and returns it no gradient.
    assert backward.unsupported(low) is None
    structs = backward.backward_struct(low)
    for k in masks:   # read per element, row stride N; nullptr (eval mode) is the identity
        read = (f"(p.operand[{k}] != nullptr ? kgen::as_float(__ldg(static_cast<const kgen::Operand*>(p.operand[{k}]) "
                "+ static_cast<long long>(m) * p.N + n)) : 1.f)")   # (the GEMM's operand type: the mask's)
        assert read in low.cuda and read in structs
        assert backward.operand_gradients(low)[k] is None
    assert "in training mode the forward draws torch's own mask" in "\n".join(low.summary())


def test_a_mask_after_a_row_reduction_is_read_in_the_row_kernel(tmp_path):
    ref = dropout_module(tmp_path, DROPOUTS[2])
    low = lower.lower(trace(ref), fused_stats=True, external_gemm=False)
    assert low.train.stage2 == lower.STAGE2_ROWS
    assert "* p.N + n)" in low.train.stage2_cuda and "int m, int N" in low.train.stage2_cuda


def test_the_emitted_forward_draws_the_mask_with_torch_in_training_mode_only(tmp_path):
    ref = dropout_module(tmp_path, DROPOUTS[3])
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    lines = generator.forward_lines(generator.lowered_parts(spec))
    draws = [line for line in lines if "torch.nn.functional.dropout(" in line]
    assert len(draws) == 2
    assert draws[0].endswith("0.3, True) if self.drop.training else None")
    assert draws[1].endswith("0.5, True) if self.drop2.training else None")
    # (no raise but the submodules' check, test_submodule_guard)
    assert [line for line in lines if "raise RuntimeError" in line] == ["    raise RuntimeError(changed_submodule)"]
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    # The masks are optional arguments of the op and of its backward op (None in eval mode);
    # the file has backward kernels, the masks kept by autograd for them.
    assert text.count("operand1: typing.Optional[torch.Tensor]") == 2
    assert "backward:  kgen kernels" in text and "p.N = N;" in generator.render_cuda_source(spec)


def test_functional_dropout_refuses_a_model_of_mixed_modes(tmp_path):
    ref = dropout_module(tmp_path, DROPOUTS[4])
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    lines = generator.forward_lines(generator.lowered_parts(spec))
    check = generator.submodule_lines(generator.lowered_parts(spec)[-1].traced.called_modules)
    assert lines[:len(check)] == check   # (the submodules' check first: test_submodule_guard)
    assert lines[len(check)] == "if any(m.training != self.training for m in self.modules()):"
    assert any(line.endswith("0.4, True) if self.training else None") for line in lines)


def test_a_dropout_of_a_row_value_is_not_reproduced_and_training_mode_still_raises(tmp_path):
    ref = dropout_module(tmp_path, "x = x.sum(dim=1, keepdim=True)\nx = self.drop(x) * 2.0")
    graph = trace(ref)
    (d,) = graph.dropouts
    assert not d["reproduced"] and not [n for n in graph.nodes if n.kind == "mask"]
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    # (after the check of the baked-in hyperparameters: the dropout's p)
    guard = generator.hyperparameter_lines(graph.hyperparameters)
    assert [path for path, _ in graph.hyperparameters] == ["drop.p"]
    lines = generator.forward_lines(generator.lowered_parts(spec))
    check = generator.submodule_lines(graph.called_modules)   # (first: test_submodule_guard)
    assert lines[:len(check)] == check
    lines = lines[len(check):]
    assert lines[:len(guard)] == guard and lines[len(guard):len(guard) + 1] == ["if self.drop.training:"]


# The compile jobs of the tests below start at collection (conftest.nvcc_prefetch): with the
# dropout masks' backward they are the tier's longest translation units (20-60 s of nvcc each on a
# 2-core machine), which run at the end of the tier otherwise. Their sources do not depend on the
# folder the module is written to.
def _kb66_wgmma_source() -> str:
    spec = Spec.of(str(kernelbench(KB_DROPOUT).path), 64, 16, 1024, math="tf32x3", backend="wgmma",
                   fusion=1, tile=WGMMA_TILE)
    return generator.render_cuda_source(spec)


def _mask_read_source(body: str, folder: Path) -> str:
    spec = Spec.of(str(dropout_module(folder, body).path), 64, 16, 1024, math="tf32x3", backend="kgen",
                   fusion=1, tile=MMA_TILE)
    return generator.render_cuda_source(spec)


@nvcc_prefetch(lambda p: sm90a_check(_kb66_wgmma_source()) if KB_DROPOUT.is_file() else [])
def test_kernelbench_66_renders_and_compiles_for_wgmma(tmp_path):
    from test_compile import NVCC, SM90A, compile_check, spills

    ref = kernelbench(KB_DROPOUT)
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(generator.render_cuda_source(spec), (SM90A,))) == []


@nvcc_prefetch(lambda p: sm90a_check(_mask_read_source(p["body"], prefetch_dir("element_operands", p))))
@pytest.mark.parametrize("body", [DROPOUTS[0], DROPOUTS[2]], ids=["pointwise_backward", "row_kernel"])
def test_a_mask_read_forward_and_backward_compiles_for_the_portable_gemm(body, tmp_path):
    """The mask in the GEMM epilogue and struct Backward (a point-wise part), and in the row
    kernel forward and in BackwardRows (a staged part)."""
    from test_compile import NVCC, SM90A, compile_check, spills

    ref = dropout_module(tmp_path, body)
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="kgen", fusion=1, tile=MMA_TILE)
    text = generator.render(spec)
    assert check_emitted(text) == []
    low = generator.lowered_parts(spec)[0]
    assert backward.unsupported(low) is None and "kgen_backward_0" in generator.render_cuda_source(spec)
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(generator.render_cuda_source(spec), (SM90A,))) == []


# ---- B: the module's input read after the GEMM ----------------------------------------------
def test_kernelbench_51_reads_its_input_in_the_tail_and_its_oracle_matches():
    ref = kernelbench(KB_RESIDUAL)
    graph = check_oracle_seeded(ref, training=True)
    (inp,) = [n for n in graph.nodes if n.kind == "input"]
    assert inp.level == "full" and inp.shape == ("M", 16) and inp.attrs["detached"]
    out = graph.node(graph.output)
    assert out.level == "full" and out.shape == ("M", 16)
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    k = next(i for i, n in enumerate(low.operands) if n.kind == "input")
    assert f"static_cast<const kgen::Param*>(p.operand[{k}])[i0 * 16 + i1]" in low.cuda and "= t[i0];" in low.cuda
    assert eval(f"({generator.out_shape(low)})", {"M": 8, "N": 1024}) == (8, 16)
    # The tail's backward (tests/test_tail_backward.py): no gradient through the detached read.
    assert backward.unsupported(low) is None and not backward.input_gradient(low)


RESIDUALS = [
    # 51's form on a row value, the input detached before the GEMM
    ("res = x.clone().detach()\ny = self.gemm(x) - self.shift\nreturn F.gelu(y.amax(dim=1, keepdim=True)) + res", 16),
    # the input itself after the GEMM (not detached: its gradient flows), ops on it in the tail
    ("y = torch.relu(self.gemm(x))\nreturn y.mean(dim=1, keepdim=True) * 0.5 + torch.tanh(x) * 2.0", 16),
    # a tile value plus the input (K == N)
    ("y = self.gemm(x.contiguous())\nreturn torch.sigmoid(y + self.shift) + x", 1024),
]


@pytest.mark.parametrize("body, k", RESIDUALS, ids=range(len(RESIDUALS)))
def test_residual_reads_of_the_input_trace_lower_and_match_the_module(body, k, tmp_path):
    ref = residual_module(tmp_path, body, in_features=k)
    for training in (True, False):
        graph = check_oracle_seeded(ref, training)
    assert graph.node(graph.output).shape == ("M", k)
    low = lower.lower(graph, fused_stats=True, external_gemm=False)
    assert "struct Tail {" in low.cuda and any(n.kind == "input" for n in low.operands)
    spec = Spec.of(str(ref.path), 64, k, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    lines = generator.forward_lines(generator.lowered_parts(spec))
    # the input as it comes (inside torch.autocast, not converted to 16 bits: eager adds it as it
    # is), in the dtype the kernels read parameters in
    taken = lines.index("module_input = x  # read again after the GEMM (a residual): as it comes, not converted")
    assert taken < lines.index("x = _kgen_checked_input(x, weight0)") < lines.index(
        "module_input = module_input.to(_kgen_param_dtype(x))")
    k_op = next(i for i, n in enumerate(low.operands) if n.kind == "input")
    assert f"operand{k_op} = module_input" in lines
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []


@pytest.mark.parametrize("body, k", RESIDUALS, ids=range(len(RESIDUALS)))
def test_the_autodiff_oracle_follows_the_input_read_after_the_gemm(body, k, tmp_path):
    ref = residual_module(tmp_path, body, in_features=k)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = (torch.rand(8, k, dtype=torch.float64) * 2 - 1).requires_grad_()
    y = model(x)
    g = torch.randn_like(y)
    expect = torch.autograd.grad(y, [x] + list(model.parameters()), g, allow_unused=True)
    with torch.no_grad():
        dx, grads = autodiff.graph_vjp(graph, x.detach(), model, g)
    torch.testing.assert_close(dx, expect[0], rtol=1e-10, atol=1e-12)
    for (name, _), e in zip(model.named_parameters(), expect[1:]):
        if e is None:   # a parameter the module does not read
            assert name not in grads
            continue
        torch.testing.assert_close(grads[name], e, rtol=1e-10, atol=1e-12, msg=name)


def test_kernelbench_51_renders_and_compiles_for_the_portable_gemm(tmp_path):
    from test_compile import NVCC, SM90A, compile_check, spills

    ref = kernelbench(KB_RESIDUAL)
    spec = Spec.of(str(ref.path), 64, 16, 1024, math="tf32x3", backend="kgen", fusion=1, tile=MMA_TILE)
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(generator.render_cuda_source(spec), (SM90A,))) == []


@pytest.mark.parametrize("body, message", [
    # (the input scaled by a number, self.gemm(x * 2.0), is taken since session 57: z scaled;
    # an op on it the GEMM reads, self.gemm(torch.relu(x)), since session 62: a prologue part)
    # (an op on the input alone before the GEMM is taken where it is used: here a residual of
    # another width than the output's)
    ("y = torch.relu(x)\nreturn self.gemm(x) + y", "do not broadcast"),
    ("return self.gemm(x.detach())", "detached copy"),
    ("y = self.gemm(x)\nreturn y.sum(dim=1, keepdim=True) + x.sum(dim=1, keepdim=True)", "sum of a value that reads the module.s input"),
])
def test_uses_of_the_input_kgen_cannot_compute_are_refused(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        trace(residual_module(tmp_path, body))


# ---- GPU tier -------------------------------------------------------------------------------
def _exec_file(text: str, name: str):
    import types

    module = types.ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)
    return module


def _gpu_backends():
    hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    return [("kgen", MMA_TILE)] + ([("wgmma", WGMMA_TILE)] if hopper else [])


def _emitted_pair(ref_path: Path, shape: tuple, backend: str, tile: Tile, tmp_path):
    """(ModelNew, the reference Model) on the GPU, built with the same seed, the same state,
    both in training mode (as constructed: KernelBench's convention)."""
    batch, k, n = shape
    spec = Spec.of(str(ref_path), batch, k, n, math="tf32x3", backend=backend, fusion=1, tile=tile)
    path = generator.write(spec, tmp_path / f"{spec.name()}.py")
    module = _exec_file(path.read_text(), f"elem_{backend}")
    ref = Reference(ref_path, {"batch": batch, "in_features": k, "out_features": n})
    torch.manual_seed(0)
    new = module.ModelNew(*ref.init_args()).cuda()
    eager = ref.Model(*ref.init_args()).cuda()
    eager.load_state_dict(new.state_dict())
    assert new.training and eager.training
    return new, eager


def _assert_same_under_seeds(new, eager, x, seeds=(1, 2, 3)):
    with torch.no_grad():
        for seed in seeds:
            torch.manual_seed(seed)
            expect = eager(x)
            eager_state = torch.cuda.get_rng_state()
            torch.manual_seed(seed)
            got = new(x)
            torch.cuda.synchronize()
            # the same mask (an element dropped by one and not the other is off by far more)
            torch.testing.assert_close(got, expect, rtol=1e-5, atol=1e-5)
            # the generator is left where the reference leaves it (later draws agree too)
            assert torch.equal(torch.cuda.get_rng_state(), eager_state)


GPU_DROPOUTS = [DROPOUTS[1], DROPOUTS[2], DROPOUTS[3]]


@pytest.mark.gpu
@pytest.mark.parametrize("body", GPU_DROPOUTS, ids=range(len(GPU_DROPOUTS)))
@pytest.mark.parametrize("shape", [(64, 128, 1024), (129, 260, 36)], ids=["aligned", "ragged"])
def test_gpu_dropout_in_training_mode_matches_the_reference_under_one_seed(body, shape, tmp_path):
    path = tmp_path / "dropout_ref.py"
    path.write_text(module_source(body, {"drop": "nn.Dropout(0.3)", "drop2": "nn.Dropout(0.5)",
                                         "bias2": "nn.Parameter(torch.randn(out_features))"},
                                  out_features=shape[2]))
    for backend, tile in _gpu_backends():
        new, eager = _emitted_pair(path, shape, backend, tile, tmp_path)
        x = torch.rand(shape[0], shape[1], device="cuda") * 2 - 1
        _assert_same_under_seeds(new, eager, x)
        # a different seed gives a different output (the mask is drawn, not fixed)
        with torch.no_grad():
            torch.manual_seed(1)
            a = new(x)
            torch.manual_seed(2)
            assert not torch.allclose(a, new(x))
        new.eval()
        eager.eval()
        _assert_same_under_seeds(new, eager, x, seeds=(1,))


@pytest.mark.gpu
def test_gpu_kernelbench_66_in_training_mode(tmp_path):
    if not KB_DROPOUT.is_file():
        pytest.skip(f"{KB_DROPOUT} is absent")
    for backend, tile in _gpu_backends():
        new, eager = _emitted_pair(KB_DROPOUT, (128, 1024, 4096), backend, tile, tmp_path)
        x = torch.rand(128, 1024, device="cuda")
        _assert_same_under_seeds(new, eager, x)


@pytest.mark.gpu
@pytest.mark.parametrize("body, k", RESIDUALS, ids=range(len(RESIDUALS)))
def test_gpu_residual_reads_of_the_input_match_the_reference(body, k, tmp_path):
    path = tmp_path / "residual_ref.py"
    path.write_text(_RESIDUAL.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8),
                                     in_features=k, out_features=1024))
    for backend, tile in _gpu_backends():
        new, eager = _emitted_pair(path, (129, k, 1024), backend, tile, tmp_path)
        x = torch.rand(129, k, device="cuda") * 2 - 1
        _assert_same_under_seeds(new, eager, x, seeds=(1,))
        # a non-contiguous input is read as its contiguous copy
        wide = torch.rand(129, 2 * k, device="cuda")[:, ::2]
        _assert_same_under_seeds(new, eager, wide, seeds=(1,))


@pytest.mark.gpu
def test_gpu_kernelbench_51(tmp_path):
    if not KB_RESIDUAL.is_file():
        pytest.skip(f"{KB_RESIDUAL} is absent")
    for backend, tile in _gpu_backends():
        new, eager = _emitted_pair(KB_RESIDUAL, (256, 1024, 1024), backend, tile, tmp_path)
        _assert_same_under_seeds(new, eager, torch.rand(256, 1024, device="cuda"), seeds=(1,))
        # It trains (its gradients against fp64: tests/test_tail_backward.py).
        x = torch.rand(4, 1024, device="cuda", requires_grad=True)
        new(x).sum().backward()
        assert x.grad is not None and bool(torch.isfinite(x.grad).all())


# Dropout's backward on the GPU, judged by kgen's own gradient checks (kgen.check.validate):
# the gradients of the input and of every parameter against fp64 autograd of the reference (each
# model's forward from one CUDA RNG state: the same mask), in training mode (the mask) and in
# eval mode (none), and 20 SGD steps; a point-wise part (struct Backward) and staged ones (the mask
# before and after a row reduction, two dropouts), at an odd shape, on each GEMM backend.
GPU_DROPOUT_BACKWARD = {"pointwise": DROPOUTS[0], "before_softmax": DROPOUTS[1], "after_mean": DROPOUTS[2],
                        "two_dropouts": DROPOUTS[3]}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(GPU_DROPOUT_BACKWARD))
def test_gpu_dropout_gradients_against_fp64_in_both_modes(case, tmp_path):
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import check_gradients, check_training, has_backward

    path = tmp_path / "dropout_ref.py"
    path.write_text(module_source(GPU_DROPOUT_BACKWARD[case], {
        "drop": "nn.Dropout(0.3)", "drop2": "nn.Dropout(0.5)", "bias2": "nn.Parameter(torch.randn(out_features))"},
        out_features=528))
    device = torch.device("cuda")
    for backend, tile in _gpu_backends():
        spec = Spec.of(str(path), 257, 300, 528, math="tf32x3", backend=backend, fusion=1, tile=tile)
        f = EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))
        assert f.runs_in_training and has_backward(f)
        for training in (True, False):
            r = check_gradients(f, device, 1e-4, 257, training)
            assert r.passed, f"{backend}, training={training}: {r.detail}"
        r = check_training(f, device, 1e-4, 257)
        assert r.passed, f"{backend}: {r.detail}"


@pytest.mark.gpu
def test_gpu_kernelbench_66_gradients(tmp_path):
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import check_gradients

    if not KB_DROPOUT.is_file():
        pytest.skip(f"{KB_DROPOUT} is absent")
    for backend, tile in _gpu_backends():
        spec = Spec.of(str(KB_DROPOUT), 128, 1024, 4096, math="tf32x3", backend=backend, fusion=1, tile=tile)
        f = EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))
        for training in (True, False):
            r = check_gradients(f, torch.device("cuda"), 1e-4, 128, training)
            assert r.passed, f"{backend}, training={training}: {r.detail}"
