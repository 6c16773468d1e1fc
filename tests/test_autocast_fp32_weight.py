"""Inside torch.autocast an fp32 module's GEMM weight stays fp32 where the file's build for autocast
can read it so (generator.autocast_gemm_type: kgen's round16 GEMM rounds it in its registers, no
pass converts it on each call), no gradient of it is wanted and the batch has at most
AUTOCAST_FP32_WEIGHT_MAX_ROWS rows; elsewhere it is converted to autocast's dtype, as before
(CPU: the file's Python against a stand-in for its compiled library; the GPU side is
tests/test_half_gpu.py's test of it and test_custom_ops.py's compiled inference under autocast)."""

from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.configs import AUTOCAST_FP32_WEIGHT_MAX_ROWS, AUTOCAST_FP32_WEIGHT_MIN_ROWS, SKINNY_MAX_ROWS
from kgen.tune.spec import Spec, Tile

from conftest import launch_on_cpu
from test_render import exec_file

REFS = Path(__file__).parent / "refs"
TILE = Tile(128, 128, 32, 16, 128, stages=4)


# x @ W with W stored (in, out), written here (no module of tests/refs/ stores its weight so).
STORED_KN = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * in_features ** -0.5)

    def forward(self, x):
        return torch.relu(x @ self.weight)


batch_size, in_features, out_features = 64, 296, 96


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
"""


@pytest.fixture(scope="module")
def stored_kn_ref(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kn") / "matmul_stored_kn.py"
    path.write_text(STORED_KN)
    return path


def spec(ref, in_features: int = 296, backend: str = "wgmma", math: str = "tf32x3") -> Spec:
    """A spec of `ref` (a module of tests/refs/ by name, or a path)."""
    path = ref if isinstance(ref, Path) else REFS / f"{ref}.py"
    return Spec.of(str(path), 64, in_features, 96, math=math, backend=backend, fusion=1,
                   tile=TILE if backend == "wgmma" else Tile(128, 128, 32, 64, 32, stages=4))


@pytest.mark.parametrize("case, expected", [
    (("gemm_swish_scale",), True),
    (("gemm_swish_scale", 300), False),                 # K % 8 != 0: the round16 GEMM does not take it
    (("gemm_max_sub_gelu",), False),                    # a part rewritten to a constant: no GEMM
    (("gemm_swish_scale", 296, "kgen", "tf32"), False),  # mma.sync: no 16-bit build at all
    (("matmul_stored_kn",), False),                     # x @ W, W stored (in, out): a transposed copy a call
], ids=["wgmma", "odd K", "constant output", "mma.sync", "stored (in, out)"])
def test_the_build_for_autocast_reads_an_fp32_weight_where_every_part_can(case, expected, stored_kn_ref):
    s = spec(stored_kn_ref if case[0] == "matmul_stored_kn" else case[0], *case[1:])
    gemm = generator.autocast_gemm_type(s)
    assert (gemm is not None) == expected
    text = generator.render(s)
    assert f"_KGEN_FP32_WEIGHT = {expected}" in text
    assert ("autocast:  inside torch.autocast an fp32 module's weight stays fp32" in text) == expected
    if expected:
        # the round16 GEMM on x of the 16-bit type, chosen where the weight is fp32
        assert gemm.startswith("kgen::WgmmaWsRound16Gemm<kgen_operand_t,") and gemm.endswith(", kgen_operand_t>")
        source = generator.render_cuda_source(s)
        assert "#ifdef KGEN_FP32_WEIGHT\ntypedef float kgen_weight_t;" in source
        assert f"std::conditional_t<std::is_same<kgen_weight_t, float>::value, {gemm}," in source


@pytest.fixture
def autocast_on(monkeypatch):
    """CUDA's autocast reported on (the file asks torch.is_autocast_enabled("cuda"), which a CPU
    host cannot turn on). The file's backward then enters torch.autocast("cuda", enabled=False),
    whose exit restores the state it read through the patched function, True, into torch's
    thread-local one for good: later tests in the process ran under CUDA's autocast (CI's one
    failure at 0833577, a custom_fwd reference whose inputs it then cast). Put back after."""
    real = torch.is_autocast_enabled("cuda")
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device_type=None: True)
    yield
    torch.set_autocast_enabled("cuda", real)


def checked_weight(module, rows: int, requires_grad: bool, grad_enabled: bool) -> torch.Tensor:
    w = torch.randn(96, 296, requires_grad=requires_grad)
    x = torch.randn(rows, 296).to(torch.bfloat16)
    with torch.set_grad_enabled(grad_enabled):
        return module._kgen_checked_param(w, x, None, "gemm.weight", module._kgen_autocast_build(x), operand=True)


@pytest.mark.parametrize("rows, requires_grad, grad_enabled, stays_fp32", [
    (64, True, False, True),                                     # inference
    (64, False, True, True),                                     # frozen weight, x's gradient wanted
    (64, True, True, False),                                     # the weight's gradient wanted: converted once
    (AUTOCAST_FP32_WEIGHT_MAX_ROWS, True, False, True),
    (AUTOCAST_FP32_WEIGHT_MAX_ROWS + 1, True, False, False),      # more rows: conversion and the half GEMM
    (AUTOCAST_FP32_WEIGHT_MIN_ROWS, True, False, True),
    (SKINNY_MAX_ROWS, True, False, False),                         # a few rows: the half GEMM's few-row path
])
def test_the_weight_stays_fp32_where_no_gradient_of_it_is_wanted_at_the_rows_it_gains(autocast_on, rows, requires_grad, grad_enabled, stays_fp32):
    module = exec_file(generator.render(spec("gemm_swish_scale")))
    assert module._KGEN_FP32_WEIGHT_ROWS == (AUTOCAST_FP32_WEIGHT_MIN_ROWS, AUTOCAST_FP32_WEIGHT_MAX_ROWS)
    w = checked_weight(module, rows, requires_grad, grad_enabled)
    assert w.dtype == (torch.float32 if stays_fp32 else torch.bfloat16)


def test_a_file_without_that_build_converts_the_weight(autocast_on):
    module = exec_file(generator.render(spec("gemm_swish_scale", 300)))   # (K % 8 != 0)
    w = torch.randn(96, 300)
    x = torch.randn(64, 300).to(torch.bfloat16)
    with torch.no_grad():
        assert module._kgen_checked_param(w, x, None, "gemm.weight", module._kgen_autocast_build(x), operand=True).dtype == torch.bfloat16


def test_the_launch_and_the_backward_pick_the_build_by_the_weights_dtype(autocast_on, monkeypatch):
    """An fp32 weight beside 16-bit x runs the build that reads it (fp32_weight); the backward
    runs the same build's kernels, computes dx from the weight's copy in x's dtype and hands dW
    back in fp32, as autocast's conversion does."""
    module = exec_file(generator.render(spec("gemm_swish_scale")))
    library = launch_on_cpu(module, monkeypatch)
    builds = []
    monkeypatch.setattr(module, "_kgen_build", lambda device=None, dtype=torch.float32, autocast=False,
                        fp32_weight=False: builds.append((dtype, autocast, fp32_weight)) or library)
    x = torch.randn(64, 296).to(torch.bfloat16)
    w = torch.randn(96, 296)
    module._KGEN_IMPLS[0](x, w, training=0, operand0=torch.randn(96), autocast=1, keep_z=0)
    module._KGEN_IMPLS[0](x, w.to(torch.bfloat16), training=0, operand0=torch.randn(96), autocast=1, keep_z=0)
    assert builds == [(torch.bfloat16, True, True), (torch.bfloat16, True, False)]
    (call, _) = library.calls
    assert call["w"] == w.data_ptr()   # (the fp32 weight itself: no copy)
    if module._KGEN_BACKWARD_ARGS[0] is None:
        return
    builds.clear()
    g = torch.randn(64, 96).to(torch.bfloat16)
    z = torch.randn(64, 96)
    dx, dw, _, _ = module._kgen_launch_backward(0, g, x, w, z, True, True, False, 0, autocast=1,
                                                operand0=torch.randn(96))
    assert builds == [(torch.bfloat16, True, True)]
    assert dx.dtype == torch.bfloat16 and dw.dtype == torch.float32
    # (the stand-in's kernels write no dz: what torch's GEMMs made of it, in those dtypes)
    assert dx.shape == x.shape and dw.shape == w.shape
