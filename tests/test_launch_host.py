"""The host's work before an emitted file's kernels start (session 47: a synchronized call's time
includes every line of it, docs/perf.md): the launch allocates no workspace where the kernels
need none, _kgen_traced still sees what records a call, and _kgen_checked_param asks
torch.autocast's state once a call and decides as before (CPU: the file's Python against a
stand-in for its compiled library)."""

from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

from conftest import launch_on_cpu
from test_render import exec_file

REFS = Path(__file__).parent / "refs"


@pytest.fixture(scope="module")
def module():
    spec = Spec.of(str(REFS / "gemm_swish_scale.py"), 64, 296, 96, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return exec_file(generator.render(spec))


@pytest.mark.parametrize("floats", [0, 48])
def test_the_launch_hands_the_kernels_a_workspace_only_where_they_need_one(module, monkeypatch, floats):
    library = launch_on_cpu(module, monkeypatch)
    monkeypatch.setattr(library, "kgen_workspace_floats_0", lambda M, N, K: floats)
    allocated = []
    real_empty = torch.empty

    def empty(*shape, **kwargs):
        t = real_empty(*shape, **kwargs)
        allocated.append(t)
        return t

    monkeypatch.setattr(torch, "empty", empty)
    x, w = torch.randn(64, 296), torch.randn(96, 296)
    out = module._kgen_launch(0, x, w, 0, training=0, operand0=torch.randn(96))
    (call,) = library.calls
    assert (call["M"], call["N"], call["K"]) == (64, 96, 296)
    assert call["out"] == out.data_ptr() and out.shape == (64, 96)
    if floats:
        (workspace,) = [t for t in allocated if t.data_ptr() == call["workspace"]]
        assert workspace.dtype == torch.float32 and workspace.numel() == floats
    else:
        # NULL, and nothing allocated beside the output
        assert call["workspace"] is None and [t.data_ptr() for t in allocated] == [out.data_ptr()]


def test_traced_sees_function_and_dispatch_modes(module):
    assert not module._kgen_traced()

    class Functions(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Dispatch(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Functions():
        assert module._kgen_traced()
    with Dispatch():
        assert module._kgen_traced()
    assert not module._kgen_traced()


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("autocast", [False, True])
def test_a_parameter_is_read_in_x_dtype_outside_autocast_and_in_fp32_inside(module, monkeypatch, x_dtype, autocast):
    """Outside autocast (or with fp32 x) every tensor the kernels read is in x's dtype and a
    parameter of another dtype is refused; inside it, with 16-bit x, a parameter is converted to
    fp32 and the weight to x's dtype."""
    asked = []
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device_type=None: asked.append(device_type) or autocast)
    x = torch.randn(64, 296).to(x_dtype)
    bias16, bias32 = torch.randn(96).to(torch.bfloat16), torch.randn(96)
    w32 = torch.randn(96, 296, requires_grad=True)
    if autocast and x_dtype != torch.float32:
        assert module._kgen_checked_param(bias16, x, (96,), "bias").dtype == torch.float32
        assert module._kgen_checked_param(bias32, x, (96,), "bias") is bias32
        # (a weight whose gradient is wanted: converted, as autocast converts Linear's)
        assert module._kgen_checked_param(w32, x, None, "weight", operand=True).dtype == x_dtype
    else:
        same = bias32 if x_dtype == torch.float32 else bias16
        other = bias16 if x_dtype == torch.float32 else bias32
        assert module._kgen_checked_param(same, x, (96,), "bias") is same
        with pytest.raises(ValueError, match="the kernels read it in"):
            module._kgen_checked_param(other, x, (96,), "bias")
    # (autocast's state asked at most once a call, a conversion's included; not at all where x is
    # fp32, which settles it)
    asked.clear()
    module._kgen_checked_param(bias16 if autocast and x_dtype != torch.float32 else bias32.to(x_dtype), x, (96,), "bias")
    assert asked == ([] if x_dtype == torch.float32 else ["cuda"])
    with pytest.raises(ValueError, match="has 96 elements"):
        module._kgen_checked_param(bias32.to(x_dtype) if not autocast or x_dtype == torch.float32 else bias32,
                                   x, (95,), "bias")
