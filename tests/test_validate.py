"""The comparison rules of kgen/check/validate.py on tensors made to a known error (CPU)."""

import pytest
import torch

from kgen.check.validate import FP32_EXACT_FACTOR, Comparison


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


def test_elements_closer_to_fp64_than_eager_pass_where_eager_is_beyond_tol():
    """A row sum near 0: eager fp32 3e-4 from fp64, a candidate 5e-5 from it (3.5e-4 from
    eager). No rounding but eager's is within 1e-4 of eager there, not even the exact result;
    the candidate is closer to the exact result, so it passes, and the check says why."""
    truth = torch.zeros(8, dtype=torch.float64)
    ref32 = (truth + 3e-4).float()
    cmp = Comparison(1e-4)
    cmp.add("output", (truth - 5e-5).float(), ref32, truth)
    assert cmp.ok and "at least as close to fp64" in cmp.result("x").detail
    # ... but not under KernelBench's own allclose, which its eval applies as it is
    plain = Comparison(1e-4, plain_allclose=True)
    plain.add("output", (truth - 5e-5).float(), ref32, truth)
    assert not plain.ok and "further than this file" in plain.failures[0]


def test_a_half_precision_check_names_the_dtype_eager_ran_in():
    """In validate(dtype=bf16) eager, the yardstick, runs in bf16: the report says so (it said
    "fp32 reference" and "eager fp32" of eager bf16's numbers)."""
    truth = torch.full((8,), 1.0, dtype=torch.float64)
    ref16 = (truth + 2e-2).to(torch.bfloat16)
    plain = Comparison(1e-2, plain_allclose=True)
    plain.add("trial 0", (truth - 1e-2).to(torch.bfloat16), ref16, truth)
    result = plain.result("replay")
    assert not result.passed and "eager bf16 is itself" in result.detail
    assert "(bf16 reference: 2.34e-02)" in result.line()   # 1.02 in bf16 is 1.0234375
    fp32 = Comparison(1e-4)
    fp32.add("output", truth.float(), truth.float(), truth)
    assert "(fp32 reference: " in fp32.result("x").line()


def test_an_element_further_from_fp64_than_eager_and_beyond_tol_fails():
    truth = torch.zeros(8, dtype=torch.float64)
    ref32 = (truth + 3e-4).float()
    new = (truth - 5e-5).float()
    new[5] = -4e-4           # one element 4e-4 from the truth, further than eager's 3e-4
    cmp = Comparison(1e-4)
    cmp.add("output", new, ref32, truth)
    assert not cmp.ok
    # where eager is accurate, the rule is allclose against eager as before
    ref32 = truth.float()
    cmp = Comparison(1e-4)
    cmp.add("output", (truth + 2e-4).float(), ref32, truth)
    assert not cmp.ok


def test_in_bf16_one_rounding_step_further_than_eager_passes_and_two_fail():
    """A bf16 output of ~12 (a step of 2**-4 there, eps * 12 ~ 0.094): eager 1/32 below the exact
    value, the candidate 3/32 above (beyond 1e-3 of eager, its error within eager's plus one
    rounding step at that magnitude) passes; one element 5/32 above passes as a whole (worst
    error within twice eager's plus a step), 9/32 above fails, as does a 3/32 difference in
    fp32."""
    truth = torch.full((4,), 12.03125, dtype=torch.float64)
    eager = torch.full((4,), 12.0, dtype=torch.bfloat16)        # 1/32 below
    one_up = torch.full((4,), 12.125, dtype=torch.bfloat16)     # 3/32 above
    cmp = Comparison(1e-3)
    cmp.add("output", one_up, eager, truth)
    assert cmp.ok, cmp.failures
    # 5/32 above on one element (the others exact) passes as a whole: 0.156 <= 2 x eager's 1/32
    # + a step (0.094) ... 
    mixed = eager.clone()
    mixed[0] = 12.1875
    cmp = Comparison(1e-3)
    cmp.add("output", mixed, eager, truth)
    assert cmp.ok and "worst error" in cmp.result("x").detail
    # ... but not a worst error past that: 2 x 1/32 + 0.094 < 0.28
    far = eager.clone()
    far[0] = 12.3125
    cmp = Comparison(1e-3)
    cmp.add("output", far, eager, truth)
    assert not cmp.ok
    cmp = Comparison(1e-3)
    cmp.add("output", one_up.float(), eager.float(), truth)
    assert not cmp.ok


def gradients_judged(tol: float, truth: torch.Tensor, ref32: torch.Tensor, new: torch.Tensor) -> Comparison:
    cmp = Comparison(tol, relative_to_largest=True, gradients=True)
    cmp.add("dL/d(weight)", new, ref32, truth)
    return cmp


def test_gradients_allow_the_tolerance_relative_to_their_size():
    """A weight gradient summed over a batch is ~1e3: a TF32 file 1e-3 off relative to the
    gradient's largest value is within its 1e-2 tier, though 1.2 off in absolute terms, and
    also on the gradient's elements near 0 (a TF32 GEMM's error follows the terms it sums)."""
    truth = torch.tensor([[1200.0, 0.5], [-800.0, 3.0]], dtype=torch.float64)
    ref32 = truth.float()
    assert gradients_judged(1e-2, truth, ref32, (truth + 1.2).float()).ok
    assert not gradients_judged(1e-2, truth, ref32, (truth + 36.0).float()).ok


def test_gradients_at_the_fp32_exact_tier_need_the_ratio_too():
    truth = torch.full((4, 3), 1200.0, dtype=torch.float64)
    ref32 = (truth + 1.2e-4).float()                         # eager fp32: ~1 ulp at 1200
    far = gradients_judged(1e-4, truth, ref32, (truth * (1 + 5e-5)).float())
    assert not far.ok and "fp32-exact gate" in far.failures[0]   # within tol, not within the ratio


def test_gradients_beyond_tol_pass_within_the_gates_factor_of_eagers_error():
    """A gradient whose largest value is small (scale ~1e-2) but where eager fp32 is itself off
    by more than tol of it: within tol + 16x eager's error passes, beyond it fails."""
    truth = torch.full((4, 3), 0.01, dtype=torch.float64)
    ref32 = (truth + 3e-5).float()
    ref_err = (ref32.double() - truth).abs().max().item()
    assert gradients_judged(1e-4, truth, ref32, (truth + 10 * ref_err).float()).ok       # 3e-4 > tol * (1 + scale)
    assert not gradients_judged(1e-4, truth, ref32, (truth + 20 * ref_err).float()).ok


def test_a_gradient_that_is_zero_in_exact_arithmetic_gets_no_huge_relative_error():
    """Under training-mode BatchNorm a Linear bias's gradient is 0 (up to rounding): its max rel
    is taken over the largest gradient of the check."""
    cmp = Comparison(1e-4, relative_to_largest=True, gradients=True)
    big = torch.full((3,), 50.0, dtype=torch.float64)
    cmp.add("dL/d(weight)", big.float(), big.float(), big)
    cmp.add("dL/d(bias)", torch.full((3,), 1e-7), torch.full((3,), 2e-7), torch.zeros(3, dtype=torch.float64))
    assert cmp.ok and cmp.max_rel < 1e-8


def _trained(dtype, steps=20, gradient_error=0.0):
    """A parameter of size ~1 moved by SGD on a fixed gradient, stored in `dtype` between steps
    (what a training check's parameter sees), its gradient off by `gradient_error` (relative)."""
    gen = torch.Generator().manual_seed(0)
    start = torch.rand(256, generator=gen, dtype=torch.float64) + 0.5
    grad = torch.randn(256, generator=gen, dtype=torch.float64)
    p = start.to(dtype)
    for _ in range(steps):
        p = p - (1.5e-4 * (1 + gradient_error) * grad).to(dtype)   # ~30x tol over the run
    return p - start.to(dtype)


def test_training_moves_are_judged_against_the_size_of_the_move():
    """The training check's parameters move ~30x tol over the run: a 1 % error in a gradient is a
    third of tol of a parameter of size 1, but 1 % of the move, outside the displacements judge;
    fp32's own rounding of the parameters passes it."""
    truth, eager = _trained(torch.float64), _trained(torch.float32)
    same = Comparison(1e-4, relative_to_largest=True, displacements=True)
    same.add("weight (its change)", _trained(torch.float32), eager, truth)
    assert same.ok, same.failures
    faulty = Comparison(1e-4, relative_to_largest=True, displacements=True)
    faulty.add("weight (its change)", _trained(torch.float32, gradient_error=0.01), eager, truth)
    assert not faulty.ok


class _KernelBenchFile:
    """What check_kernelbench_eval reads of an EmittedFile, on the CPU: a reference Model and
    get_inputs, and a ModelNew (here the reference itself, or one that adds an offset)."""

    def __init__(self, offset: float, seeded: bool = True):
        import types

        class Model(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.linear = torch.nn.Linear(n, n)

            def forward(self, x):
                return self.linear(x).sum(dim=1, keepdim=True)

        class ModelNew(Model):
            def __init__(self, n):
                if not seeded:
                    torch.rand(1)   # a draw before construction: other parameters than Model's
                super().__init__(n)

            def forward(self, x):
                return super().forward(x) + offset

        self.Model, self.ModelNew = Model, ModelNew
        self.reference = types.SimpleNamespace(draw=lambda: [torch.rand(16, 32)])   # (its get_inputs())

    def init_args(self):
        return (32,)


def test_kernelbench_eval_runs_kernelbenchs_procedure():
    from kgen.check import validate

    passed = validate.check_kernelbench_eval(_KernelBenchFile(0.0), "cpu", 1e-4)
    assert passed.passed and passed.name == validate.KERNELBENCH_CHECK
    assert not validate.check_kernelbench_eval(_KernelBenchFile(3e-3), "cpu", 1e-4).passed
    # Nothing is copied between the models: a ModelNew whose construction draws differently fails.
    unseeded = validate.check_kernelbench_eval(_KernelBenchFile(0.0, seeded=False), "cpu", 1e-4)
    assert not unseeded.passed and "trial 0" in unseeded.detail


def test_where_eager_overflows_only_allclose_decides():
    """Eager fp32 inf where fp64 is finite: its error is inf, which must not excuse any value."""
    truth = torch.tensor([1.0, 4e38, 2.0], dtype=torch.float64)
    ref32 = truth.float()                       # 4e38 overflows to inf in fp32
    for wrong in (0.0, 123.0, float("-inf")):
        new = ref32.clone()
        new[1] = wrong
        cmp = Comparison(1e-2)
        cmp.add("output", new, ref32, truth)
        assert not cmp.ok, wrong


def test_kernelbench_allclose_scales_rtol_with_the_new_output_and_checks_dtypes():
    """KernelBench calls torch.allclose(eager, new): rtol times |new|, dtypes must match."""
    truth = torch.tensor([100.0], dtype=torch.float64)
    ref32, new = truth.float(), torch.tensor([98.995])
    # |100 - 98.995| = 1.005 > 1e-2 + 1e-2 * 98.995, though <= 1e-2 + 1e-2 * 100
    plain = Comparison(1e-2, plain_allclose=True)
    plain.add("output", new, ref32, truth)
    assert not plain.ok
    plain = Comparison(1e-2, plain_allclose=True)
    plain.add("output", ref32.double(), ref32, truth)    # right values, fp64 output
    assert not plain.ok


def test_the_kernelbench_replay_is_a_check_unless_dropout_makes_training_random():
    """KernelBench runs the module in training mode: a file with an active Dropout (checked in
    eval mode only) is left out of the replay, every other file gets it in its full validation."""
    import types

    from kgen.check import validate

    def names(dropouts):
        f = types.SimpleNamespace(dropouts=dropouts, runs_in_training=not dropouts, has_batchnorm=False)
        return [name for name, _ in validate.checks(f, 1e-4, quick=False, batch=8, device="cpu")]

    assert validate.KERNELBENCH_CHECK in names([])
    assert validate.KERNELBENCH_CHECK not in names(["dropout"])
    f = types.SimpleNamespace(dropouts=[], runs_in_training=True, has_batchnorm=False)
    assert validate.KERNELBENCH_CHECK not in [n for n, _ in validate.checks(f, 1e-4, quick=True, batch=8, device="cpu")]


def pattern_judged(new: torch.Tensor, ref32: torch.Tensor, truth: torch.Tensor, **kwargs) -> Comparison:
    cmp = Comparison(1e-4)
    for key, value in kwargs.items():
        setattr(cmp, key, value)
    cmp.add("output", new, ref32, truth)
    return cmp


def rows_with_nan():
    """Eager fp32 with a NaN row (a NaN input row through a row reduction) and a finite one."""
    truth = torch.tensor([[float("nan")] * 3, [0.25, 0.5, 0.25]], dtype=torch.float64)
    return truth.float(), truth


def test_a_nan_dropped_by_the_candidate_fails_with_where_and_what():
    ref32, truth = rows_with_nan()
    new = ref32.clone()
    new[0] = torch.tensor([0.53, 0.2, 0.27])      # a row max that dropped the NaN
    cmp = pattern_judged(new, ref32, truth)
    assert not cmp.ok and cmp.pattern_failed
    assert cmp.failures == ["output: NaN pattern differs at 3 element(s): eager NaN, new 0.53 at (0, 0)"]


def test_equal_nan_patterns_pass_and_the_finite_elements_are_still_judged():
    ref32, truth = rows_with_nan()
    cmp = pattern_judged(ref32.clone(), ref32, truth)
    assert cmp.ok and cmp.max_abs == 0.0
    off = ref32.clone()
    off[1, 1] += 1e-3                               # the finite row, beyond tol
    cmp = pattern_judged(off, ref32, truth)
    assert not cmp.ok and not cmp.pattern_failed and "differs (max abs" in cmp.failures[0]


def test_a_nan_where_eager_is_finite_fails():
    ref32, truth = rows_with_nan()
    new = ref32.clone()
    new[1, 2] = float("nan")
    cmp = pattern_judged(new, ref32, truth)
    assert not cmp.ok and "eager 0.25, new NaN at (1, 2)" in cmp.failures[0]


def test_an_infinity_against_a_large_finite_value_fails_unless_rounding_decides_it():
    largest = torch.finfo(torch.float32).max
    truth = torch.tensor([1e30, 1.0], dtype=torch.float64)
    ref32 = torch.tensor([float("inf"), 1.0])      # eager overflowed (say exp of a larger logit)
    cmp = pattern_judged(torch.tensor([3e38, 1.0]), ref32, truth)
    assert not cmp.ok and "inf pattern differs at 1 element(s): eager inf, new 3e+38 at (0,)" in cmp.failures[0]
    # ... and the other way round
    cmp = pattern_judged(ref32, torch.tensor([3e38, 1.0]), truth)
    assert not cmp.ok
    # an exact value at fp32's largest: which side of it the rounding lands on is not a fault
    at_the_edge = torch.tensor([largest, 1.0], dtype=torch.float64)
    assert pattern_judged(torch.tensor([largest, 1.0]), ref32, at_the_edge).ok
    # the sign of an infinity counts
    assert not pattern_judged(torch.tensor([float("-inf"), 1.0]), ref32, truth).ok


def test_an_overflow_of_eager_on_the_way_may_be_the_exact_value_in_the_candidate():
    """log1p(exp(x)) - log1p(x) at x = 88.72: eager's exp overflowed (inf), the exact value is
    84.2; a candidate with 84.2 is the closer one and passes, one with another number fails, and
    so does a candidate's own overflow where eager is finite."""
    truth = torch.tensor([84.2, 1.0], dtype=torch.float64)
    ref32 = torch.tensor([float("inf"), 1.0])
    assert pattern_judged(torch.tensor([84.2, 1.0]), ref32, truth).ok
    cmp = pattern_judged(torch.tensor([85.0, 1.0]), ref32, truth)
    assert not cmp.ok and "inf pattern differs" in cmp.failures[0]
    assert not pattern_judged(torch.tensor([float("inf"), 1.0]), torch.tensor([84.2, 1.0]), truth).ok


def test_infinities_may_become_nan_only_where_allowed():
    truth = torch.tensor([float("inf"), float("-inf"), 0.5], dtype=torch.float64)
    ref32 = truth.float()
    new = torch.tensor([float("nan"), float("nan"), 0.5])
    assert not pattern_judged(new, ref32, truth).ok
    assert pattern_judged(new, ref32, truth, infinities_may_become_nan=True).ok
    # ... but a finite element may not become NaN, nor an infinity a number
    assert not pattern_judged(torch.tensor([float("nan"), float("nan"), float("nan")]), ref32, truth,
                              infinities_may_become_nan=True).ok
    assert not pattern_judged(torch.tensor([1.0, float("nan"), 0.5]), ref32, truth,
                              infinities_may_become_nan=True).ok


def test_nan_allowed_where_the_mask_says_so():
    """A split-operand GEMM (3xTF32) turns an infinite input into NaN wherever it reaches:
    the NaN run's eager output marks where that is."""
    truth = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64)    # sigmoid of -inf, +inf, 0
    ref32 = truth.float()
    new = torch.tensor([float("nan"), float("nan"), 0.5])
    reached = torch.tensor([True, True, False])
    cmp = Comparison(1e-4)
    cmp.add("output", new, ref32, truth, nan_allowed=reached)
    assert cmp.ok
    cmp = Comparison(1e-4)
    cmp.add("output", torch.tensor([float("nan"), 1.0, float("nan")]), ref32, truth, nan_allowed=reached)
    assert not cmp.ok


def test_kernelbench_replay_keeps_its_own_nan_semantics():
    """KernelBench's allclose has equal_nan=False: its replay fails on NaN even where both are."""
    ref32, truth = rows_with_nan()
    plain = Comparison(1e-4, plain_allclose=True)
    plain.add("output", ref32.clone(), ref32, truth)
    assert not plain.ok


def test_the_new_checks_run_in_both_tiers_and_training_replaces_sgd():
    import types

    from kgen.check import validate

    f = types.SimpleNamespace(dropouts=[], runs_in_training=True, has_batchnorm=True)
    quick = [n for n, _ in validate.checks(f, 1e-4, quick=True, batch=8, device="cpu")]
    full = [n for n, _ in validate.checks(f, 1e-4, quick=False, batch=8, device="cpu")]
    for name in ("NaN and Inf in input rows", "NaN in each parameter", validate.MAGNITUDE_CHECK):
        assert name in quick and name in full
    assert validate.TRAINING_CHECK in full and validate.TRAINING_CHECK not in quick
    assert not any("SGD" in n for n in full)


def test_a_reproduced_dropout_gets_its_gradients_checked_in_both_modes():
    """Dropout has backward kernels (the mask in training mode, none in eval): a file with one
    has its gradients checked in each mode and its training steps tracked; KernelBench's replay stays
    out (its two draws would differ)."""
    import types

    from kgen.check import validate

    f = types.SimpleNamespace(dropouts=[{"reproduced": True}], runs_in_training=True, has_batchnorm=False)
    names = [name for name, _ in validate.checks(f, 1e-4, quick=False, batch=8, device="cpu")]
    assert {"gradients, train mode", "gradients, eval mode", validate.TRAINING_CHECK} <= set(names)
    assert validate.KERNELBENCH_CHECK not in names


def test_a_relaxed_tiers_gradient_yardstick_is_eager_in_its_math():
    """check_gradients runs eager's GEMMs in a TF32 / BF16 / FP16 file's math (the yardstick of
    its gradients), fp32 for every other math, and leaves torch's setting as it found it."""
    from kgen.check.validate import eager_matmul_math

    before = torch.get_float32_matmul_precision()
    for math, inside in (("tf32", "high"), ("bf16", "high"), ("fp16", "high"), ("tf32x3", before),
                         ("fp32_simt", before)):
        with eager_matmul_math(math):
            assert torch.get_float32_matmul_precision() == inside, math
        assert torch.get_float32_matmul_precision() == before
    with pytest.raises(ValueError), eager_matmul_math("tf32"):
        raise ValueError("a failing check")
    assert torch.get_float32_matmul_precision() == before


@pytest.mark.parametrize("math, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_a_16_bit_files_eager_yardstick_sums_products_of_rounded_operands(math, dtype):
    """torch has no fp32 GEMM on bf16 / fp16 products ("medium" is TF32 on CUDA): inside
    eager_matmul_math, eager's GEMMs (F.linear, @, addmm) compute on operands rounded to the math,
    as kgen's kernels do, and their gradients are the unrounded operands' (kgen's backward GEMMs
    of such a file run TF32 on fp32); a GEMM the file runs otherwise (kgen's wgmma: TF32 at
    K % 8 != 0, fp32 products at a few rows) is not rounded; outside, fp32 products again."""
    import torch.nn.functional as F

    from kgen.check.validate import eager_matmul_math

    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 64, generator=g, requires_grad=True)
    w = torch.randn(32, 64, generator=g)
    b = torch.randn(32, generator=g)
    rounded = (x.detach().to(dtype).double() @ w.to(dtype).double().t()).float()
    fp32 = (x.detach().double() @ w.double().t()).float()
    assert (rounded - fp32).abs().max() > 1e-3   # (the roundings differ by far more than fp32's)
    with eager_matmul_math(math, "wgmma"):
        for z in (F.linear(x, w), x @ w.t(), torch.addmm(b, x, w.t()) - b, torch.einsum("bk,nk->bn", x, w)):
            torch.testing.assert_close(z, rounded, atol=1e-4, rtol=1e-5)
        F.linear(x, w).sum().backward()
        # K = 60, no multiple of 8: kgen's wgmma GEMM runs TF32 there (cuBLAS's BF16 would not)
        odd = F.linear(x[:, :60], w[:, :60])
        torch.testing.assert_close(odd, (x[:, :60].double() @ w[:, :60].double().t()).float(), atol=1e-4, rtol=1e-5)
        # 16 rows: the few-row GEMM of fp32 products runs them
        few = F.linear(x[:16], w)
        torch.testing.assert_close(few, fp32[:16], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(x.grad, w.sum(0).expand_as(x))
    # cuBLAS's (and mma.sync's) BF16 files round at every K, and their backward GEMMs run the
    # math's products too: the gradient is the rounded operands'
    x.grad = None
    with eager_matmul_math(math, "cublas"):
        cublas_odd = F.linear(x[:, :60], w[:, :60])
        F.linear(x, w).sum().backward()
    assert (cublas_odd.double() - (x[:, :60].detach().to(dtype).double() @ w[:, :60].to(dtype).double().t())).abs().max() < 1e-4
    torch.testing.assert_close(x.grad, w.to(dtype).float().sum(0).expand_as(x))
    torch.testing.assert_close(F.linear(x, w), fp32, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("family", ["wgmma", "cublas"])
def test_the_rounded_yardstick_keeps_an_infinity_of_the_operands(family):
    """An infinite operand gives eager's infinity, not the NaN of inf - inf, where a gradient is
    wanted too; a row that overflows fp16 only when rounded still passes its gradient (a wgmma
    file's backward reads the fp32 operands), and a weight's gradient flows where only it wants
    one."""
    import torch.nn.functional as F

    from kgen.check.validate import eager_matmul_math

    rows = 17   # (more than a few: at most 16 a wgmma file's GEMM runs fp32 products)
    x = torch.tensor([[float("inf"), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]] * rows, requires_grad=True)
    with eager_matmul_math("fp16", family):
        z = F.linear(x, torch.ones(2, 8))
    assert torch.equal(z.detach(), torch.full((rows, 2), float("inf")))
    # 70000 rounds to fp16's infinity; its product with 1 is finite in fp32
    x = torch.tensor([[70000.0] + [0.0] * 7] * rows, requires_grad=True)
    w = torch.ones(2, 8, requires_grad=True)
    with eager_matmul_math("fp16", family):
        z = F.linear(x, w)
    assert torch.equal(z.detach(), torch.full((rows, 2), float("inf")))
    z.sum().backward()
    assert torch.equal(x.grad, torch.full((rows, 8), 2.0)) and w.grad[0, 0] > 0


def test_elements_left_out_at_a_jump_are_not_judged_and_the_check_says_so():
    """An output element at a jump of the reference (kinks.jump_mask) that the file computed on
    the other side of it, by the whole jump: left out, the check passes and counts it; judged,
    it fails. The non-finite pattern is still checked on every element."""
    ref64 = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    ref32 = ref64.float()
    new = ref32.clone()
    new[7] += 0.1
    at_jump = torch.zeros(1000, dtype=torch.bool)
    at_jump[7] = True
    judged = Comparison(1e-4)
    judged.add("output", new, ref32, ref64)
    assert not judged.ok
    left = Comparison(1e-4)
    left.add("output", new, ref32, ref64, left_out=at_jump)
    assert left.ok and "1 output element(s) at a jump or kink of the reference left out" in left.result("x").detail
    new[9] = float("nan")
    pattern = Comparison(1e-4)
    pattern.add("output", new, ref32, ref64, left_out=at_jump)
    assert not pattern.ok and pattern.pattern_failed


def test_kernelbenchs_replay_says_when_its_allclose_fails_at_a_jump():
    """KernelBench's allclose judges every element, those at a jump too (its eval would fail the
    file there): the check fails, and says how many of the elements apart from eager's sit at a
    jump of the reference, where eager's GEMM and the file's rounded to the step's two sides."""
    ref64 = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    ref32 = ref64.float()
    new = ref32.clone()
    new[7] += 0.1
    at_jump = torch.zeros(1000, dtype=torch.bool)
    at_jump[7] = True
    replay = Comparison(1e-4, plain_allclose=True)
    replay.add("trial 0", new, ref32, ref64, left_out=at_jump)
    assert not replay.ok
    assert "1 of the 1 element(s) apart from eager's sit at a jump of the reference" in replay.failures[0]
    new[9] += 0.1   # one more, not at a jump
    replay = Comparison(1e-4, plain_allclose=True)
    replay.add("trial 0", new, ref32, ref64, left_out=at_jump)
    assert not replay.ok and "1 of the 2 element(s)" in replay.failures[0]


def test_the_forward_checks_look_for_jumps_only_where_the_reference_has_a_where(tmp_path):
    from types import SimpleNamespace
    from kgen.check.validate import may_jump
    from kgen.frontend.reference import Reference
    from conftest import module_source

    def ref(body):
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.py"
        path.write_text(module_source(body, {}, out_features=16))
        return SimpleNamespace(reference=Reference(path))

    assert may_jump(ref("x = F.hardshrink(x, 0.1)")) and may_jump(ref("x = torch.where(x > 0, x, 0.5)"))
    assert not may_jump(ref("x = torch.relu(x) * 2.0"))


def test_a_yardstick_larger_than_eagers_own_error_judges_the_output():
    """The training check's drift of two eager runs (kinks that flip by chance): an error within
    the gate's factor of the yardstick passes, beyond it fails; a yardstick smaller than eager's
    own error changes nothing."""
    ref64 = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    eager = (ref64 + 1e-7).float()
    new = ref64.float().clone()
    new[3] += 1e-3
    for yardstick, ok in ((0.0, False), (1e-4, True), (1e-5, False)):
        cmp = Comparison(1e-4, judge_by_fp64=True)
        cmp.add("step", new, eager, ref64, yardstick=yardstick)
        assert cmp.ok == ok, yardstick


def test_the_momentum_none_check_knows_a_functional_batch_norm(tmp_path):
    """F.batch_norm takes no momentum=None (torch raises): the check that sets the modules'
    momentum to None cannot run such a reference, and is said not run; a BatchNorm1d module's is run."""
    from types import SimpleNamespace
    from kgen.check.validate import functional_batchnorm
    from kgen.frontend.reference import Reference
    from conftest import module_source

    def ref(body):
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.py"
        path.write_text(module_source(body, {"bn": "nn.BatchNorm1d(out_features)"}, out_features=16))
        return SimpleNamespace(reference=Reference(path))

    assert functional_batchnorm(ref("x = F.batch_norm(x, self.bn.running_mean, self.bn.running_var, "
                                    "self.bn.weight, self.bn.bias, self.training, 0.1, 1e-5)"))
    assert not functional_batchnorm(ref("x = self.bn(x)"))


def test_the_second_eager_run_sums_the_same_function_in_another_order(tmp_path):
    """The training check's second eager model (validate._second_eager): its first GEMM's weight
    columns and the input's features permuted alike, so its output is the reference's up to
    rounding, and it returns the order that maps the reference's weight onto its own; without an
    IR (or with a read of the input after the GEMM) its input is moved by a rounding instead."""
    import copy
    from types import SimpleNamespace
    from kgen.check.validate import _reference_nodes, _second_eager
    from kgen.frontend.reference import Reference
    from conftest import module_source

    def case(body, out_features=32):
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.py"
        path.write_text(module_source(body, {}, out_features=out_features))
        ref = Reference(path)
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args())
        x = torch.rand(8, 16)
        return SimpleNamespace(reference=ref), model, x

    f, model, x = case("x = torch.relu(x) * 2.0")
    second, moved_x, permuted = _second_eager(f, model, x)
    assert list(permuted) == ["gemm.weight"] and not torch.equal(moved_x, x)
    torch.testing.assert_close(second(moved_x), model(x), rtol=1e-6, atol=1e-6)
    perm, dim = permuted["gemm.weight"]
    assert dim == 1 and torch.equal(model.gemm.weight.index_select(dim, perm), second.gemm.weight)
    assert torch.equal(second.gemm.weight.index_select(dim, torch.argsort(perm)), model.gemm.weight)
    f._reference_nodes = []   # no IR: the input moved by a rounding
    second, moved_x, permuted = _second_eager(f, model, x)
    assert permuted == {} and 0 < float((moved_x - x).abs().max()) < 1e-6
    # The Linear applied twice: its weight permuted would compute another function (the second
    # GEMM reads it too), so the input is moved by a rounding instead.
    f, model, x = case("x = self.gemm(torch.sigmoid(x))", out_features=16)
    assert [n.attrs["weight"] for n in _reference_nodes(f) if n.kind == "gemm"] == ["gemm.weight"] * 2
    second, moved_x, permuted = _second_eager(f, model, x)
    assert permuted == {} and 0 < float((moved_x - x).abs().max()) < 1e-6
    torch.testing.assert_close(second(moved_x), model(x), rtol=1e-5, atol=1e-5)


class _RmsInPlace(torch.nn.Module):
    """x * rsqrt(mean(x^2)), the product written in place over the value pow saved (torch's own
    backward then raises), or out of place."""
    def __init__(self, in_place: bool):
        super().__init__()
        self.in_place = in_place

    def forward(self, x):
        h = x * 1.0
        r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return h.mul_(r) if self.in_place else h * r


def test_a_reference_whose_own_backward_raises_has_its_gradients_left_unchecked_and_said_so():
    from types import SimpleNamespace
    from kgen.check.validate import _reference_backward_raises
    x = torch.randn(4, 8)
    trio = SimpleNamespace(ref64=_RmsInPlace(True).double(), new=_RmsInPlace(False))
    r = _reference_backward_raises(trio, x, "gradients, train mode")
    assert r.passed and "not checked: the reference's own backward raises" in r.detail
    assert "modified by an inplace operation" in r.detail and "ModelNew's computes gradients" in r.detail
    trio.new = _RmsInPlace(True)
    assert "ModelNew's raises too" in _reference_backward_raises(trio, x, "g").detail
    # a reference whose backward runs is judged as before
    assert _reference_backward_raises(SimpleNamespace(ref64=_RmsInPlace(False).double(), new=None), x, "g") is None


class _BackwardFails(torch.autograd.Function):
    """The identity, whose backward raises what torch raises out of memory (a RuntimeError)."""
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


class _FailingBackward(torch.nn.Module):
    def forward(self, x):
        return _BackwardFails.apply(x)


def test_a_reference_backward_failing_otherwise_is_no_reason_to_pass():
    """Out of memory (a RuntimeError), a CUDA error: the check runs on and reports the failure
    as it raises it, never a pass that judged nothing (only autograd's in-place error is the
    reference's own backward failing for every input)."""
    from types import SimpleNamespace
    from kgen.check.validate import _reference_backward_raises
    x = torch.randn(4, 8)
    trio = SimpleNamespace(ref64=_FailingBackward().double(), new=_RmsInPlace(False))
    assert _reference_backward_raises(trio, x, "g") is None
