"""How the generated epilogue reads the module's parameters and buffers (lower/forward.py,
Emitter): with `__ldg`, a load no store of the kernel may reach, so that the compiler keeps a
column's operands across the rows a thread stores (common.cuh, tile_store); except BatchNorm's
running buffers, which the finalize kernel that may read one updates in place (a module that uses
its BatchNorm's running mean before the BatchNorm), read with plain loads."""

import re

import pytest

from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

TILE = Tile(128, 128, 32, 16, 128, stages=4)
LOAD = re.compile(r"__ldg\(p\.operand\[(\d+)\] \+ \w+\)|p\.operand\[(\d+)\]\[\w+\]")


def loads(spec) -> dict[str, set[str]]:
    """Per operand path, how the spec's CUDA reads it: {"ldg"}, {"plain"} or both."""
    paths = [n.attrs["path"] for n in generator.lowered(spec).operands]
    out: dict[str, set[str]] = {}
    for ldg, plain in LOAD.findall(generator.render_cuda_source(spec)):
        out.setdefault(paths[int(ldg or plain)], set()).add("ldg" if ldg else "plain")
    return out


REFERENCE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(out_features))
        self.block = nn.Module()
        self.block.norm = nn.BatchNorm1d(out_features)
        self.bn = nn.BatchNorm1d(out_features)

    def forward(self, x):
        x = self.linear(x) * self.scale
        return BN(x + BN.running_mean)


def get_inputs():
    return [torch.rand(128, 64)]


def get_init_inputs():
    return [64, 64]
"""


@pytest.mark.parametrize("bn", ["self.bn", "self.block.norm"])
def test_running_buffers_read_before_their_batchnorm_take_plain_loads(tmp_path, bn):
    ref = tmp_path / "ref.py"
    ref.write_text(REFERENCE.replace("BN", bn))
    spec = Spec.of(str(ref), 128, 64, 64, math="tf32x3", backend="wgmma", fusion=1, tile=TILE)
    got = loads(spec)
    assert got[f"{bn.removeprefix('self.')}.running_mean"] == {"plain"}, got
    assert got["linear.bias"] == {"ldg"} and got["scale"] == {"ldg"}, got


def test_parameters_take_read_only_loads():
    spec = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="wgmma", fusion=1, tile=TILE)
    got = loads(spec)
    assert got and all(kinds == {"ldg"} for kinds in got.values()), got


@pytest.mark.parametrize("read", ["before", "after"])
def test_a_16_bit_module_reading_a_running_buffer_into_its_batchnorm_runs_fp32_only(tmp_path, read):
    """In training a 16-bit build applies BatchNorm to its input recomputed from S after the
    statistics' kernel updated the running buffers (stage 2): a read of one on the way into the
    BatchNorm would see the updated buffer (measured on an H200: 0.5 off in bf16, 9 of the gate's
    20 checks failed). Such a file runs fp32 modules only, and says why; a read after the
    BatchNorm, which sees the updated buffer in torch too, keeps the 16-bit builds."""
    ref = tmp_path / "ref.py"
    text = REFERENCE.replace("BN", "self.bn")
    if read == "after":
        text = text.replace("return self.bn(x + self.bn.running_mean)", "return self.bn(x) + self.bn.running_mean")
    ref.write_text(text)
    spec = Spec.of(str(ref), 128, 64, 64, math="tf32x3", backend="wgmma", fusion=1, tile=TILE)
    assert generator.sixteen_bit_builds(spec) == (read == "after")
    if read == "before":
        assert generator.fp32_only_reason(spec) == (
            "line 16 of the reference (`return self.bn(x + self.bn.running_mean)`): it reads bn.running_mean on "
            "the way into that BatchNorm, which updates the buffer in training mode; kgen's 16-bit build would "
            "read it after the update; run the module in float32")
        assert "_KGEN_OPERAND_BUILDS = {torch.float32: None}" in generator.render(spec)
