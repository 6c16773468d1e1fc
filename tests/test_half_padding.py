"""A module whose in_features is no multiple of 8 (16-bit) or 4 (fp32): kgen's Hopper GEMMs read x
and w by TMA in whole 16-byte rows, so the emitted file hands its kernels copies padded with zeros
to a multiple of 8 (CPU: the file's launch code run against a stand-in for its compiled library; the
GPU side, the full gate at such widths, is tests/test_half_gpu.py)."""

from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

from conftest import launch_on_cpu


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    spec = Spec.of(str(Path(__file__).parent / "refs" / "gemm_swish_scale.py"), 64, 300, 96, math="tf32x3",
                   backend="wgmma", fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4))
    return EmittedFile(generator.write(spec, tmp_path_factory.mktemp("pad") / f"{spec.name()}.py"))


def launch(emitted, monkeypatch, dtype, in_features):
    """Part 0's body (its _kgen_launch) on CPU tensors of `dtype`, the stand-in library's call returned
    with the pointers of x and w as the file padded them, if it did."""
    m = emitted.module
    library = launch_on_cpu(m, monkeypatch)
    padded = {}
    real_pad = m._kgen_padded

    def pad(t, k):
        out = real_pad(t, k)
        padded[out.data_ptr()] = out
        return out

    monkeypatch.setattr(m, "_kgen_padded", pad)
    x = torch.randn(64, in_features).to(dtype)
    w = torch.randn(96, in_features).to(dtype)
    m._KGEN_IMPLS[0](x, w, training=0, operand0=torch.randn(96).to(dtype), autocast=0, keep_z=0)   # (the Linear's bias; no autocast)
    (call,) = library.calls
    return call, x, w, padded


@pytest.mark.parametrize("in_features, padded_to", [(300, 304), (301, 304), (7, 8), (0, 8)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_16_bit_k_is_padded_with_zeros_to_a_multiple_of_8(emitted, monkeypatch, dtype, in_features, padded_to):
    call, x, w, padded = launch(emitted, monkeypatch, dtype, in_features)
    assert (call["M"], call["N"], call["K"]) == (64, 96, padded_to)
    px, pw = padded[call["x"]], padded[call["w"]]
    assert px.shape == (64, padded_to) and pw.shape == (96, padded_to) and px.dtype == pw.dtype == dtype
    assert torch.equal(px[:, :in_features], x) and torch.equal(pw[:, :in_features], w)
    assert not px[:, in_features:].any() and not pw[:, in_features:].any()


@pytest.mark.parametrize("in_features, padded_to", [(301, 304), (302, 304), (7, 8), (0, 8)])
def test_an_fp32_k_off_16_byte_rows_is_padded_too(emitted, monkeypatch, in_features, padded_to):
    """fp32's GEMM reads by TMA as the 16-bit one does; without the copies it ran a kernel of scalar
    loads and no split-K (3x cuBLAS's time at 300 x 1337 -> 260 on an H200)."""
    call, x, w, padded = launch(emitted, monkeypatch, torch.float32, in_features)
    assert (call["M"], call["N"], call["K"]) == (64, 96, padded_to)
    px, pw = padded[call["x"]], padded[call["w"]]
    assert torch.equal(px[:, :in_features], x) and torch.equal(pw[:, :in_features], w)
    assert not px[:, in_features:].any() and not pw[:, in_features:].any()


@pytest.mark.parametrize("dtype, in_features", [(torch.float32, 300), (torch.float32, 1340), (torch.bfloat16, 296)])
def test_no_copy_where_the_rows_are_whole_16_byte_units(emitted, monkeypatch, dtype, in_features):
    call, x, w, padded = launch(emitted, monkeypatch, dtype, in_features)
    assert call["K"] == in_features and not padded
    assert call["x"] == x.data_ptr() and call["w"] == w.data_ptr()
