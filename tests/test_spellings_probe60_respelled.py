"""What session 60's second probe of KernelBench's files respelled found (CPU; the respellings are
tests/test_kernelbench_respelled.py's new axes):

- refused, though it means the same: torch.Tensor's methods called unbound on a traced value
  (`torch.Tensor.relu(x)`, `torch.Tensor.mul(x, 2.0)`, `torch.Tensor.sum(x, 1, keepdim=True)`):
  the C methods torch.Tensor inherits take no fx Proxy ("descriptor 'mul' ... doesn't apply to a
  'Proxy' object"). Now traced as the bound call (_LocatingTracer.unbound_methods_traced).
"""

import pytest
import torch

from test_spellings_ops import PARAMS, check, describe, write

# (spelling, the plain form with the same IR)
TAKEN = {
    "torch.Tensor.relu": ("x = torch.Tensor.relu(x)", "x = x.relu()"),
    "torch.Tensor.mul by a number": ("x = torch.Tensor.mul(x, 2.0)", "x = x.mul(2.0)"),
    "torch.Tensor.add of a parameter": ("x = torch.Tensor.add(x, self.b)", "x = x.add(self.b)"),
    "torch.Tensor.sum keepdim": ("x = x - torch.Tensor.sum(x, 1, keepdim=True)", "x = x - x.sum(1, keepdim=True)"),
    "torch.Tensor.clamp": ("x = torch.Tensor.clamp(x, -0.5, 0.5)", "x = x.clamp(-0.5, 0.5)"),
    "torch.Tensor.sigmoid nested": ("x = torch.Tensor.mul(x, torch.Tensor.sigmoid(x))", "x = x.mul(x.sigmoid())"),
}


@pytest.mark.parametrize("case", sorted(TAKEN))
def test_an_unbound_tensor_method_is_its_bound_call(case, tmp_path):
    spelled, plain = TAKEN[case]
    ref = write(tmp_path, "spelled", spelled, PARAMS)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", plain, PARAMS))


def test_the_unbound_methods_are_torchs_again_after_the_trace(tmp_path):
    """The shadowing methods are gone after the trace (and after a refused one)."""
    before = torch.Tensor.mul
    describe(write(tmp_path, "spelled", "x = torch.Tensor.mul(x, 2.0)", PARAMS))
    assert "mul" not in vars(torch.Tensor) and torch.Tensor.mul is before
    assert torch.equal(torch.Tensor.mul(torch.ones(2), 3.0), torch.full((2,), 3.0))


# out=None, torch's default (no tensor written into), was refused as out= (the result written into
# a tensor given); out= a tensor still is.
OUT_NONE = {
    "torch.mul(x, 2.0, out=None)": "x = x * 2.0",
    "torch.add(x, self.b, out=None)": "x = x + self.b",
    "torch.sigmoid(x, out=None)": "x = torch.sigmoid(x)",
    "torch.sum(x, 1, keepdim=True, out=None) - x": "x = x.sum(1, keepdim=True) - x",
}


@pytest.mark.parametrize("spelled", sorted(OUT_NONE))
def test_out_none_is_the_result_returned(spelled, tmp_path):
    ref = write(tmp_path, "spelled", f"x = {spelled}", PARAMS)
    check(ref)
    assert describe(ref) == describe(write(tmp_path, "plain", OUT_NONE[spelled], PARAMS))


def test_out_a_tensor_is_still_refused(tmp_path):
    from kgen.ir.graph import Unsupported
    with pytest.raises(Unsupported, match="out= .the result written into a tensor given"):
        describe(write(tmp_path, "spelled", "y = x * 1.0\ntorch.mul(x, 2.0, out=y)\nx = y", PARAMS))
