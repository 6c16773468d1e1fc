"""The fp64 judge draws each Dropout mask as the module's dtype draws it (kgen/check/masks.py).

On the GPU torch's mask depends on the tensor's dtype (its fused kernel's vector width), so the
fp64 reference drew another mask than ModelNew and eager (session 37, call D: KernelBench 66's
gradients 60 % of their size from fp64's, in both). On the CPU every dtype draws one mask: these
tests check that the fp64 reference's masks are drawn from a tensor of the module's dtype (a
spy on the draw), and that its values are then the module's in fp64, for each spelling of a
Dropout kgen reproduces."""

import copy
import types

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kgen.check import masks
from kgen.check.masks import masks_drawn_in

SPELLINGS = {
    "nn.Dropout": lambda m, y: m.drop(y),
    "F.dropout": lambda m, y: F.dropout(y, 0.25, m.training),
    "F.dropout in place": lambda m, y: F.dropout(y * 1.0, 0.25, m.training, inplace=True),
    "torch.dropout": lambda m, y: torch.dropout(y, 0.25, m.training),
    "torch.dropout_": lambda m, y: torch.dropout_(y * 1.0, 0.25, m.training),
}


class Model(nn.Module):
    def __init__(self, spelling):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.25)
        self.spelling = spelling

    def forward(self, x):
        return torch.tanh(SPELLINGS[self.spelling](self, self.fc(x)))


def pair(spelling, dtype):
    torch.manual_seed(0)
    model = Model(spelling).to(dtype)
    model64 = masks_drawn_in(copy.deepcopy(model).double(), dtype)
    return model, model64


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_fp64_reference_draws_its_masks_in_the_modules_dtype(spelling, dtype, monkeypatch):
    model, model64 = pair(spelling, dtype)
    drawn = []

    def spy(input, *args, **kwargs):
        drawn.append(input.dtype)
        return F.dropout(input, *args, **kwargs)

    monkeypatch.setattr(masks, "F", types.SimpleNamespace(dropout=spy))
    x = torch.randn(8, 16)
    for training in (True, False):
        model.train(training)
        model64.train(training)
        drawn.clear()
        torch.manual_seed(1)
        y = model(x.to(dtype))
        torch.manual_seed(1)
        y64 = model64(x.to(dtype).double())
        # the mask of a tensor of the module's dtype, once a forward, in training mode only
        # (torch.dropout with train=False, and eval mode, draw nothing)
        assert drawn == ([dtype] if training else []), (spelling, training, drawn)
        tol = 1e-6 if dtype == torch.float32 else 2e-2
        assert torch.allclose(y.double(), y64, atol=tol, rtol=0), (spelling, training)


def test_gradients_flow_through_the_fp64_mask():
    model, model64 = pair("nn.Dropout", torch.float32)
    x = torch.randn(8, 16)
    grads = []
    for m, xi in ((model, x.clone()), (model64, x.double())):
        xi.requires_grad_()
        torch.manual_seed(3)
        m(xi).sum().backward()
        grads.append(xi.grad.double())
    assert (grads[0] != 0).any() and torch.allclose(grads[0], grads[1], atol=1e-6, rtol=0)


def test_a_deep_copy_runs_its_own_parameters():
    _, model64 = pair("nn.Dropout", torch.float32)
    copied = copy.deepcopy(model64)
    with torch.no_grad():
        copied.fc.weight.mul_(2.0)
    x = torch.randn(4, 16, dtype=torch.float64)
    model64.eval()
    copied.eval()
    assert not torch.allclose(model64(x), copied(x))


def test_a_model_without_dropout_or_in_fp64_is_left_as_it_is():
    model = nn.Linear(4, 4).double()
    assert "forward" not in vars(masks_drawn_in(model, torch.float32, dropouts=()))
    assert "forward" not in vars(masks_drawn_in(model, torch.float64))
    assert "forward" in vars(masks_drawn_in(model, torch.float32))


def test_in_place_dropout_of_the_fp64_reference_writes_its_input():
    model64 = masks_drawn_in(Model("F.dropout").double(), torch.float32)
    y = torch.ones(4, 32, dtype=torch.float64)
    with masks._MasksIn(torch.float32):
        out = F.dropout(y, 0.5, True, inplace=True)
        out_ = torch.dropout_(torch.ones(4, 32, dtype=torch.float64), 0.5, True)
    assert out is y and set(y.unique().tolist()) <= {0.0, 2.0} and (y == 0).any()
    assert set(out_.unique().tolist()) <= {0.0, 2.0}
    assert "forward" in vars(model64)


def test_the_gates_fp64_reference_draws_the_modules_masks(tmp_path):
    """validate's Trio builds its fp64 reference so where the file has a Dropout, and only there."""
    from pathlib import Path

    from kgen.check.loading import EmittedFile
    from kgen.check.validate import Trio
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    refs = Path(__file__).parent / "refs"
    for ref, has_dropout in (("gemm_dropout_scale_softmax.py", True), ("gemm_mul_leakyrelu.py", False)):
        spec = Spec.of(str(refs / ref), 16, 64, 32, math="tf32x3", backend="wgmma", fusion=1,
                       tile=Tile(128, 128, 32, 16, 128, stages=4))
        f = EmittedFile(generator.write(spec, tmp_path / f"{spec.name()}.py"))
        trio = Trio(f, "cpu", dtype=torch.bfloat16)
        assert ("forward" in vars(trio.ref64)) == has_dropout, ref
        assert "forward" not in vars(trio.ref) and "forward" not in vars(trio.new)
