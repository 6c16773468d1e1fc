"""The comparison rules of kgen/validate.py on tensors made to a known error (CPU)."""

import torch

from kgen.validate import FP32_EXACT_FACTOR, Comparison


def outputs(ref_err: float, new_err: float, scale: float = 4000.0):
    """fp64 truth, an fp32 reference off by ref_err, a candidate off by new_err (max abs)."""
    truth = torch.full((4, 3), scale, dtype=torch.float64)
    ref32 = (truth + ref_err).float()
    new = (truth - new_err).float()
    return new, ref32, truth


def judged(tol: float, ref_err: float, new_err: float) -> bool:
    cmp = Comparison(tol, judge_by_fp64=True)
    new, ref32, truth = outputs(ref_err, new_err)
    # fp32 rounding of the made-up values is part of both errors: compare to what was stored.
    cmp.add("output", new, ref32, truth)
    return cmp.ok


def test_offset_check_at_the_fp32_exact_tier_allows_the_gates_factor():
    ref_err = (torch.tensor(4000.0 + 7.5e-4).float().double() - 4000.0).item()  # what fp32 keeps
    assert judged(1e-4, ref_err, 3.3 * ref_err)            # 3xTF32 on an un-normalized output
    assert not judged(1e-4, ref_err, 50 * ref_err)          # a cancelling variance
    assert not judged(1e-4, ref_err, (FP32_EXACT_FACTOR + 1) * ref_err)   # the gate's bound


def test_offset_check_at_loose_tiers_allows_twice_the_reference_error():
    ref_err = (torch.tensor(4000.0 + 2.5e-3).float().double() - 4000.0).item()
    assert judged(1e-3, ref_err, 1.5 * ref_err)
    assert not judged(1e-3, ref_err, 3.3 * ref_err)


def test_a_failure_closer_to_fp64_than_eager_says_so():
    truth = torch.zeros(8, dtype=torch.float64)
    ref32 = (truth + 3e-4).float()        # eager fp32 off by 3e-4 (a sum near 0)
    new = (truth - 5e-5).float()           # the candidate off by 5e-5: 3.5e-4 from eager
    cmp = Comparison(1e-4)
    cmp.add("output", new, ref32, truth)
    assert not cmp.ok and "further than this file" in cmp.failures[0]
