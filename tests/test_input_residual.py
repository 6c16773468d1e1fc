"""The module's input read per element before a row op, a norm or BatchNorm: a post-norm residual,
`norm(x + fc(x))`, `softmax(fc(x) + x)`, where in_features = out_features. `Tracer._tile_input`
makes the read a tile value, which the kernels read at (m, n) as they read Dropout's mask; the
staged backward sends its gradient to `EpilogueParams::d_input`, which ModelNew adds to dx.

The spellings are generated: residual forms (operators, methods, functions, in place, scaled,
detached, cloned) by the row ops and norms kgen takes, and a two-GEMM block.

CPU tier: the IR's oracle against the module in fp64 in both modes, kgen's backward specification
(graph_vjp) against torch.autograd, the emitted file statically checked and with a backward; the
row kernel's gradients of z and of the input run on the host (tests/test_backward_host.py's
harness) against autograd; nvcc compile-only of a row-kernel part (wgmma, Dropout too) and of a
BatchNorm-prefix part (the portable GEMM). GPU tier (`-m gpu`): kgen's full gate (forward against
fp64, gradients with eager's error as the yardstick, training steps) on both GEMM backends.
"""

import ast
import copy
import textwrap

import pytest
import torch

from kgen.check.static_checks import check_emitted
from kgen.codegen import generator
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported
from kgen.lower import backward
from kgen.tune.spec import Spec, Tile

from conftest import nvcc_prefetch, prefetch_dir, sm90a_check
from test_autodiff import check_module_gradients

WGMMA_TILE = Tile(128, 128, 32, 16, 128, stages=4)
MMA_TILE = Tile(128, 128, 32, 64, 32, stages=3)
FEATURES = 64   # in_features = out_features (GroupNorm(8): groups of 8)

_MODULE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features
        self.fc = nn.Linear(features, features)
        self.fc2 = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)
        self.gn = nn.GroupNorm(8, features)
        self.bn = nn.BatchNorm1d(features)
        self.rms = nn.RMSNorm(features, eps=1e-6)   # (eps None: finfo(dtype).eps, fp64 in the oracle)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
{body}


batch_size = 8
features = {features}


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''

# r = the residual sum, from y = the Linear's output: ways people write it.
RESIDUALS = {
    "plus": "r = x + y",
    "plus_swapped": "r = y + x",
    "method": "r = y.add(x)",
    "function": "r = torch.add(y, x)",
    "scaled": "r = y + 0.5 * x",
    "alpha": "r = torch.add(y, x, alpha=0.25)",
    "in_place": "y += x\nr = y",
    "cloned": "r = x.clone() + y",
    "detached": "r = y - x.detach()",
    "dropout_then_residual": "r = x + self.drop(y)",
}
# What follows the residual: the row ops and norms kgen takes.
ROW_OPS = {
    "layernorm_module": "return self.norm(r)",
    "layer_norm_function": "return F.layer_norm(r, (self.features,))",
    "layernorm_by_hand": "mu = r.mean(-1, keepdim=True)\nreturn (r - mu) * torch.rsqrt(r.var(-1, keepdim=True, unbiased=False) + 1e-5)",
    "softmax": "return torch.softmax(r, dim=-1)",
    "log_softmax": "return F.log_softmax(r, 1)",
    "logsumexp": "return torch.logsumexp(r, dim=1)",
    "normalize": "return F.normalize(r)",
    "groupnorm": "return self.gn(r)",
    "rmsnorm": "return self.rms(r)",
    "batchnorm": "return F.gelu(self.bn(r))",
    "max_pool": "return F.max_pool1d(r.unsqueeze(1), 4).squeeze(1)",
    "norm_then_input_again": "return self.norm(r) + x",
}
CASES = {**{f"{r}-layernorm_module": (RESIDUALS[r], ROW_OPS["layernorm_module"]) for r in RESIDUALS},
         **{f"plus-{o}": (RESIDUALS["plus"], ROW_OPS[o]) for o in ROW_OPS if o != "layernorm_module"},
         "ffn_block": ("r = x + self.fc2(F.gelu(y))", ROW_OPS["layernorm_module"])}


def module_file(folder, case: str):
    residual, op = CASES[case]
    body = "y = self.fc(x)\n" + residual + "\n" + op
    path = folder / f"{case.replace('-', '_')}.py"
    path.write_text(_MODULE.format(body=textwrap.indent(body, " " * 8), features=FEATURES))
    return path


def check_oracle(ref: Reference, training: bool):
    """Graph.interpret against the module in fp64, both right after one seed (a Dropout in
    training mode draws the same mask in both)."""
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double().train(training)
    twin = copy.deepcopy(model)
    x = torch.randn(8, FEATURES, dtype=torch.float64)
    with torch.no_grad():
        torch.manual_seed(5)
        expect = model(x)
        torch.manual_seed(5)
        got = graph.interpret(x, twin)
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)
    return graph


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_residual_before_a_row_op_traces_matches_and_has_a_backward(case, tmp_path):
    ref = Reference(module_file(tmp_path, case))
    for training in (True, False):
        graph = check_oracle(ref, training)
    reads = [n for n in graph.nodes if n.kind == "input"]
    assert reads and all(n.level == "tile" for n in reads), [n.describe() for n in reads]
    # kgen's backward specification against torch.autograd (fp64; a Dropout draws one mask in both)
    for training in (True, False):
        check_module_gradients(ref, training, in_features=FEATURES)
    # the emitted file: statically clean, with kgen's backward kernels, passing the input on
    spec = Spec.of(str(ref.path), 8, FEATURES, FEATURES, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA_TILE)
    parts = generator.lowered_parts(spec)
    last = parts[-1]
    assert all(backward.unsupported(low) is None for low in parts), [backward.unsupported(low) for low in parts]
    assert backward.input_gradient(last) == ("detached" not in case)
    assert not last.tail   # the input is read by the stages, not by a broadcast tail
    k = next(i for i, n in enumerate(last.operands) if n.kind == "input")
    assert f"static_cast<const kgen::Param*>(p.operand[{k}]) + static_cast<long long>(m) * p.N + n" in last.cuda
    text = generator.render(spec)
    ast.parse(text)
    assert check_emitted(text) == []
    assert f"operand{k} = module_input" in text


def test_a_residual_without_a_row_op_after_it_stays_in_the_broadcast_tail(tmp_path):
    """Where no row op follows, the read stays the broadcast tail's (one point-wise pass), as
    before: only a row op, a norm or BatchNorm makes it a tile value."""
    path = tmp_path / "plain.py"
    path.write_text(_MODULE.format(body="        return torch.relu(self.fc(x)) + x", features=FEATURES))
    graph = trace(Reference(path))
    (read,) = [n for n in graph.nodes if n.kind == "input"]
    assert read.level == "full"


@pytest.mark.parametrize("body, message", [
    # out_features 1 != in_features: x + y is (batch, in_features), not (batch, N)
    ("y = self.fc1(x)\nreturn torch.softmax(y + x, dim=1)", "softmax of a value that reads the module.s input"),
    # the input meets a parameter of another shape: a (2, batch, N) value, not (batch, N)
    ("y = self.fc(x)\nreturn torch.softmax(y + x * self.p, dim=1)", "softmax of a value that reads the module.s input"),
])
def test_reads_of_the_input_that_are_not_batch_by_n_are_still_refused(body, message, tmp_path):
    path = tmp_path / "refused.py"
    text = _MODULE.format(body=textwrap.indent(body, " " * 8), features=FEATURES)
    text = text.replace("self.drop = nn.Dropout(0.25)", "self.drop = nn.Dropout(0.25)\n        self.p = nn.Parameter(torch.ones(2, 1, features))\n"
                        "        self.fc1 = nn.Linear(features, 1)")
    path.write_text(text)
    with pytest.raises(Unsupported, match=message):
        trace(Reference(path))


# ---- the row kernel's backward on the host (g++) ---------------------------------------------
HOST_CASES = ["plus-softmax", "plus-normalize", "plus-groupnorm", "plus-max_pool", "plus-logsumexp",
              "dropout_then_residual-layernorm_module", "detached-layernorm_module", "scaled-layernorm_module",
              "plus-norm_then_input_again"]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("case", HOST_CASES)
def test_the_row_kernel_sends_the_input_its_gradient(case, training, tmp_path):
    """With the identity as weight, torch's dL/dx is dz (through the GEMM) plus what the row
    kernel adds to d_input: the two together against autograd of the module."""
    from test_backward_host import GXX, check_row_kernel

    if GXX is None:
        pytest.skip("g++ not on PATH")
    folder = tmp_path / "ref"
    folder.mkdir()
    check_row_kernel(str(module_file(folder, case)), tmp_path, training)


# ---- nvcc, compile only ------------------------------------------------------------------------
def _source(case: str, backend: str, folder) -> str:
    spec = Spec.of(str(module_file(folder, case)), 8, FEATURES, FEATURES, math="tf32x3", backend=backend,
                   fusion=1, tile=WGMMA_TILE if backend == "wgmma" else MMA_TILE)
    return generator.render_cuda_source(spec)


COMPILED = [("dropout_then_residual-layernorm_module", "wgmma"), ("plus-batchnorm", "kgen")]


@nvcc_prefetch(lambda p: sm90a_check(_source(p["case"], p["backend"], prefetch_dir("input_residual", p))))
@pytest.mark.parametrize("case, backend", COMPILED, ids=["rows_wgmma", "batchnorm_prefix_mma"])
def test_the_input_read_and_its_gradient_compile(case, backend):
    from test_compile import NVCC, SM90A, compile_check, spills

    source = _source(case, backend, prefetch_dir("input_residual", {"case": case, "backend": backend}))
    assert "p.d_input[" in source
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    assert spills(compile_check(source, (SM90A,))) == []


# ---- GPU tier ----------------------------------------------------------------------------------
GPU_CASES = ["dropout_then_residual-layernorm_module", "plus-batchnorm", "plus-softmax", "ffn_block",
             "detached-layernorm_module"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_full_gate(case, tmp_path):
    """kgen validate's full gate at an odd width (in = out = 296), both GEMM backends."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import validate

    hopper = torch.cuda.get_device_capability() == (9, 0)
    path = module_file(tmp_path, case)
    for backend, tile in [("kgen", MMA_TILE)] + ([("wgmma", WGMMA_TILE)] if hopper else []):
        fusion = 2 if "batchnorm" in case else 1
        spec = Spec.of(str(path), 257, 296, 296, math="tf32x3", backend=backend, fusion=fusion, tile=tile)
        f = EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))
        results = validate(f, tol=1e-4)
        assert all(r.passed for r in results), [r.line() for r in results if not r.passed]
