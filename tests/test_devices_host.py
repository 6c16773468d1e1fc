"""Emitted files on any GPU of a host, not only device 0, and under torch.distributed (CPU: the
text of the files, and their BatchNorm argument code run on CPU tensors). The GPU side is
tests/test_multigpu.py (two ranks, cuda:0 and cuda:1)."""

import re

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

SPECS = [
    Spec.of("gemm_scale_bn", 256, 512, 512, math="tf32x3", backend="wgmma", fusion=2,
            tile=Tile(128, 128, 32, 16, 128, stages=4)),
    Spec.of("gemm_bn_scale_softmax", 256, 512, 512, math="tf32x3", backend="kgen", fusion=1,
            tile=Tile(128, 128, 32, 64, 32, stages=3)),
    Spec.of("gemm_scale_bn", 256, 512, 512, math="fp32_simt", backend="cublas", fusion=1),
    Spec.of("gemm_scale_bn", 256, 512, 512, math="fp16x3", backend="wgmma", fusion=2,
            tile=Tile(128, 128, 32, 16, 128, stages=3)),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name())
def test_emitted_files_run_on_the_inputs_device_not_device_0(spec):
    text = generator.render(spec)
    python = text[text.index("_KGEN_SOURCE_HASH = "):]
    # No device chosen by number or by whatever happens to be current: every launch, build,
    # stream and allocation names x's device.
    assert not re.search(r"cuda:0|device=0\b|get_device_properties\(0\)|get_device_capability\(0\)", text)
    # (current_device() once: _kgen_on enters no guard where x's device is the current one already)
    assert python.count("current_device()") == 1 and "set_device(" not in python
    assert ("return _KGEN_NO_GUARD if device.index == torch.cuda.current_device() else torch.cuda.device(device)"
            in python)
    # the forward's call and the backward's workspace size; the backward's call
    # (_kgen_call_backward) and the forward's workspace size (split-K depends on the SM count),
    # both sizes asked once per shape and device, on the device given: x's
    # The forward's launch reads x's device once (`device = x.device`; host time on every call)
    # and names it everywhere; the backward names x.device.
    launch = python[python.index("def _kgen_launch("):python.index("# ---- torch.library custom ops")]
    assert launch.count("device = x.device") == 1 and "x.device" not in launch.replace("device = x.device", "")
    assert "with _kgen_on(device):" in launch and "_kgen_workspace_floats(library, part, device, M, N, K)" in launch
    assert "_kgen_build(device, x.dtype, bool(autocast), w.dtype != x.dtype)" in launch
    assert "_kgen_stream(device)" in launch
    # the backward's workspace size and call, the forward's workspace size (split-K depends on the
    # SM count): both sizes asked once per shape and device, on the device given: x's
    assert python.count("with _kgen_on(x.device):") == 1
    assert python.count("with _kgen_on(device):") == 3
    assert "_kgen_call_backward(library, part, x.device, args)" in python
    assert ("_kgen_build(x.device, dtype, bool(autocast), w_dtype != dtype)" in python
            and "_kgen_build(x.device, torch.float32)" in python)
    # every launch on x's device's current stream (the raw handle where torch has it)
    assert python.count("stream=_kgen_stream(x.device)") == 1
    assert "return _KGEN_RAW_STREAM(device.index)" in python and "torch.cuda.current_stream(device).cuda_stream" in python
    assert "torch.cuda.current_stream()" not in python
    # (w's kept split, where a GEMM splits w (fp16x3): made on the device the launch passes it)
    splits_w = spec.math == "fp16x3"
    assert ("_kgen_w_split(part, weight, floats, w_split_records, device, stream, not w_split_floats)" in launch) == splits_w
    assert "stream = _kgen_stream(device)" in launch
    w_split = python[python.index("def _kgen_w_split("):][:python[python.index("def _kgen_w_split("):].index("\n\n\n")] if splits_w else "\0"
    for line in python.splitlines():
        if re.search(r"torch\.(?:empty|zeros|ones|full)\(", line):
            assert "device=x.device" in line or ("device=device" in line and (line in launch or line in w_split)), line
    # The C side: every entry point makes the current device's (the caller's x.device) primary
    # context current on the calling thread before anything else (autograd's backward thread).
    assert "cudaGetDevice(&device) == cudaSuccess) (void)cudaSetDevice(device)" in text
    entries = re.findall(r"KGEN_EXPORT const char\* kgen_(?:forward|backward)_\d+\([^)]*\) \{\n(.*)", text)
    assert entries and all(first.strip() == "kgen::enter();" for first in entries), entries
    if spec.backend == "cublas":
        # one cuBLAS handle per device
        assert "handles[device]" in text


@pytest.fixture()
def emitted(tmp_path):
    spec = SPECS[0]
    return EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))


def _pretend_world(monkeypatch, size):
    monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: size)


def test_sync_batchnorm_that_would_synchronize_is_refused(emitted, monkeypatch):
    """convert_sync_batchnorm swaps the BatchNorm1d ModelNew reads for a SyncBatchNorm: its
    kernels would silently compute per-process statistics, so training mode across processes is
    refused, with what to do instead."""
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(emitted.ModelNew(*emitted.init_args()))
    assert isinstance(model.bn, torch.nn.SyncBatchNorm)
    x = torch.randn(8, 512)
    _pretend_world(monkeypatch, 2)
    with pytest.raises(RuntimeError, match="SyncBatchNorm.*per-process statistics"):
        emitted.module._kgen_batchnorm_args(model.bn, x, 512, "bn", False)
    # eval mode: SyncBatchNorm is BatchNorm1d with running statistics; allowed
    model.eval()
    args = emitted.module._kgen_batchnorm_args(model.bn, x, 512, "bn", False)
    assert args["training"] == 0


def test_sync_batchnorm_of_one_process_is_batchnorm(emitted, monkeypatch):
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(emitted.ModelNew(*emitted.init_args()))
    x = torch.randn(8, 512)
    args = emitted.module._kgen_batchnorm_args(model.bn, x, 512, "bn", False)   # no process group
    assert args["training"] == 1
    _pretend_world(monkeypatch, 1)
    assert emitted.module._kgen_batchnorm_args(model.bn, x, 512, "bn", False)["training"] == 1


def test_plain_batchnorm_under_a_process_group_is_per_process(emitted, monkeypatch):
    """BatchNorm1d under DDP computes each process's statistics, as torch's does: no refusal."""
    model = emitted.ModelNew(*emitted.init_args())
    _pretend_world(monkeypatch, 2)
    assert emitted.module._kgen_batchnorm_args(model.bn, torch.randn(8, 512), 512, "bn", False)["training"] == 1


@pytest.mark.parametrize("momentum", [0.1, None])
def test_a_training_forward_counts_its_batch_once(emitted, momentum):
    """num_batches_tracked goes up by one per training forward, as nn.BatchNorm1d's: before the
    kernels launch where they average over it (momentum None), after their launch otherwise
    (_kgen_store_running_stats: off the host's path before the launch); not in eval mode."""
    model = emitted.ModelNew(*emitted.init_args())
    bn, m = model.bn, emitted.module
    bn.momentum = momentum
    x = torch.randn(8, 512)
    for step in (1, 2):
        args = m._kgen_batchnorm_args(bn, x, 512, "bn", False)
        assert int(bn.num_batches_tracked) == (step if momentum is None else step - 1)
        assert args["cumulative"] == int(momentum is None)
        m._kgen_store_running_stats(bn, args, bn.running_mean.clone(), bn.running_var.clone())
        assert int(bn.num_batches_tracked) == step
    bn.eval()
    args = m._kgen_batchnorm_args(bn, x, 512, "bn", False)
    m._kgen_store_running_stats(bn, args, bn.running_mean.clone(), bn.running_var.clone())
    assert int(bn.num_batches_tracked) == 2
