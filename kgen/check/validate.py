"""Validation of an emitted file against its reference Model (docs/design.md, "Validation").

Every check compares ModelNew with the fp32 reference by torch.allclose(atol=rtol=tol), as
KernelBench does, and reports the error of both against an fp64 copy of the reference. Training
checks compare the output and every buffer of the module (BatchNorm's running statistics and
num_batches_tracked) after every call.

Two gates decide a check:
- allclose(atol=rtol=tol) against eager fp32, KernelBench's yardstick, in every tier; an element
  at least as close to fp64 as eager fp32's passes too (where eager is itself more than tol from
  the exact result, no other rounding is within tol of it: Comparison._close_to_eager). The check
  that replays KernelBench's own eval (check_kernelbench_eval) takes no such exception: it calls
  allclose(eager, new) as KernelBench does (and the gate below applies on top);
- in the fp32-exact tiers (tol <= FP32_EXACT_MAX_TOL), also the fp32-exact gate: on every tensor
  compared, ModelNew's max error against fp64 is at most FP32_EXACT_FACTOR times eager fp32's own
  error on the same inputs. An absolute 1e-4 says little about outputs that are small or flat
  (softmax over 8192 features is ~1.2e-4 everywhere: logits off by 0.1 % pass allclose), while
  the ratio to eager fp32's error is scale-free.

A CUDA error that leaves the context unusable (an illegal address) stops the validation: the
check where it surfaced reports it once, the rest are marked "not run: CUDA context lost".
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import math
from typing import Callable

import torch

from kgen.check.kinks import _BuffersKept, gradients, jump_mask, kink_free_gradient, output_shape
from kgen.check.loading import EmittedFile
from kgen.check.masks import masks_drawn_in
from kgen.check.rounding import gemm_operands_rounded
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace
from kgen.ir.graph import smooth, stored_weight
from kgen.ir.ops import JUMPING
from kgen.tune.configs import SKINNY_MAX_ROWS, gemm_math, precision_name
from kgen.tune.spec import ROUND16_MATHS

TRIALS = 5
# A common offset much larger than the spread of the inputs: E[z^2] - E[z]^2 cancels
# catastrophically there (errors of 1e-1 and worse). The GEMM itself is ill-conditioned on such
# inputs (|z| ~ 350 sigma_z): measured on an H100, the fp32 reference is 2.3e-3 away from fp64
# at offset 100. So this check is judged against fp64, allowing the fp32 reference's own error:
# max |new - fp64| <= tol + 2 * max |ref32 - fp64|, and at the fp32-exact tier the gate's factor
# instead of 2 (an un-normalized output, e.g. a row sum of the GEMM output, keeps the offset's
# magnitude; 3xTF32's error there measured 3.3x eager fp32's, which the gate accepts and the
# factor 2 did not; a cancelling variance is off by 50x and more and still fails).
LARGE_OFFSET = 100.0
# At tolerances this loose a TF32 or BF16 GEMM (cuBLAS's as much as kgen's) loses the signal of
# the offset inputs entirely (measured: output errors of 0.3 and more), so the offset check can
# no longer judge the statistics; it is reported without gating.
OFFSET_GATES_BELOW_TOL = 1e-3
ODD_BATCHES = (1000, 7, 2051)
# The fp32-exact gate (see the module docstring). The factor comes from measurements on an H100
# (docs/perf.md, "Issue 12"): the shipped 3xTF32 winners' worst ratio over all checks was 5.5
# (3xTF32 drops the lo*lo product and rounds to TF32 twice: a little more error than SGEMM's);
# the TF32 and BF16 winners of the 1e-2 tier are at 48x and above, planted faults far higher.
FP32_EXACT_FACTOR = 16.0
# In bf16 / fp16, a tensor whose elements are not each within tol of eager or as near fp64 passes
# when its worst error is at most this many times eager's worst (plus one rounding step of the
# dtype): Comparison._close_to_eager.
HALF_ERROR_FACTOR = 2.0
FP32_EXACT_MAX_TOL = 1e-4
# KernelBench's correctness procedure (its eval's run_and_check_correctness): the models built
# right after seeding 42, five trials whose input seeds torch.manual_seed(42) then randint draws.
KERNELBENCH_SEED = 42
KERNELBENCH_TRIALS = 5
# Errors below one fp32 ulp of the tensor's largest value count as that ulp in the ratio: an
# eager error of exactly 0 (e.g. a buffer that did not move) must not make any rounding fail.
ULP_FP32 = 2.0 ** -23


@dataclasses.dataclass
class CheckResult:
    name: str
    passed: bool
    max_abs: float = float("nan")   # max |new - fp64 reference| over everything compared
    max_rel: float = float("nan")   # the same over max |fp64 reference|
    ref_abs: float = float("nan")   # the eager reference's own max abs error vs fp64
    detail: str = ""
    crashed: bool = False               # the check raised instead of comparing
    # max over the tensors compared of |new - fp64| / |eager fp32 - fp64| (floored at an ulp)
    error_ratio: float = float("nan")
    gate: str = ""                      # "fp32-exact" when the ratio gated the check
    not_run: bool = False               # skipped: an earlier check lost the CUDA context (or failed, stop_at_failure)
    eager: str = "fp32"                 # the dtype eager (the yardstick, ref_abs's) ran in

    def line(self) -> str:
        status = "SKIP" if self.not_run else ("PASS" if self.passed else "FAIL")
        nums = ""
        if not math.isnan(self.max_abs):
            nums = (f"  max abs {self.max_abs:.2e}  max rel {self.max_rel:.2e}"
                    f"  ({self.eager} reference: {self.ref_abs:.2e})")
        if not math.isnan(self.error_ratio):
            nums += f"  {self.error_ratio:.2f}x eager's error"
        return f"{status}  {self.name:<34}{nums}{'  ' + self.detail if self.detail else ''}"


class Comparison:
    """Accumulates the worst errors over the tensors of one check."""

    def __init__(self, tol: float, judge_by_fp64: bool = False, relative_to_largest: bool = False,
                 gradients: bool = False, plain_allclose: bool = False, displacements: bool = False):
        # judge_by_fp64: pass when the error vs fp64 is within tol + twice the fp32 reference's
        # (the gate's factor at the fp32-exact tier; see LARGE_OFFSET).
        self.tol = tol
        self.judge_by_fp64 = judge_by_fp64
        self.fp32_exact = fp32_exact_tier(tol)
        self.ok = True
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.ref_abs = 0.0
        self.ratio = 0.0
        self.failures: list[str] = []
        self.notes: list[str] = []    # said of a passing check
        # plain_allclose: KernelBench's allclose(eager, new) as it calls it, no element judged
        # against fp64 instead
        self.plain_allclose = plain_allclose
        # max_rel over the largest value of all the tensors compared (gradients: a Linear bias's
        # gradient under training-mode BatchNorm is 0 in exact arithmetic, so its own scale
        # would make any rounding look like a relative error of 1e8)
        self.relative_to_largest = relative_to_largest
        self.largest = 0.0
        # Gradients (and parameters after SGD): within tol relative to the tensor's largest
        # value (norm-wise: a TF32 GEMM's error is relative to the terms it sums, so a weight
        # gradient's elements near 0 carry the error of its largest ones; measured, a TF32
        # file's dW at 1e-3 of its max failed elementwise allclose at 1e-2), or within tol + the
        # gate's factor times eager fp32's error (a gradient summed over the batch is ~1e3: fp32
        # itself is not within an absolute 1e-4 of fp64 there); the ratio gate on top at the
        # fp32-exact tier, as for outputs.
        self.gradients = gradients
        # Displacements (a parameter's change over training): within tol of the tensor's largest
        # displacement plus the gate's factor times eager fp32's error, with no absolute floor. The
        # parameters' own scale (1 + |p|) would hide a 1 % error in a gradient: each moves only
        # some 30x tol over the run, so 1 % of it is a third of tol (measured on an H100).
        self.displacements = displacements
        # An infinity of eager's output may come out NaN (the check with infinite inputs: where
        # an infinity meets another of the other sign, or a zero, in another order than eager's
        # kernels sum in, the result is NaN; which one torch gets depends on its kernel).
        self.infinities_may_become_nan = False
        self.pattern_failed = False   # a failure of the non-finite pattern (not of the numbers)
        self.left_out = 0   # elements at a jump or kink of the reference, not judged (kinks.jump_mask)
        self.eager = "fp32"   # the dtype of eager's tensors compared (bf16 / fp16 in validate(dtype=...))

    def add(self, what: str, new: torch.Tensor, ref32: torch.Tensor, ref64: torch.Tensor,
            nan_allowed: torch.Tensor | None = None, left_out: torch.Tensor | None = None,
            yardstick: float = 0.0):
        """Judge `new` against eager `ref32`, errors against `ref64`. Outside KernelBench's replay,
        the non-finite pattern comes first (nonfinite_mismatch: NaN, +inf, -inf where eager has
        them, `nan_allowed` aside); the numbers then judge the elements finite in both, except
        those `left_out` marks (at a jump of the reference: kinks.jump_mask). `yardstick`: an
        eager error to judge by where it is larger than ref32's own (the training check's drift
        of two eager runs where kinks flip by chance: _training_run)."""
        self.eager = precision_name(ref32.dtype)
        # KernelBench's own allclose judges every element (as its eval does), before any is left out
        jump_note = ""
        plain_close = (new.shape == ref32.shape and new.dtype == ref32.dtype
                       and torch.allclose(ref32.detach(), new.detach(), atol=self.tol, rtol=self.tol)) \
            if self.plain_allclose else None
        if not self.plain_allclose and new.shape == ref32.shape:
            mismatch = nonfinite_mismatch(new, ref32, ref64, self.tol, nan_allowed,
                                          self.infinities_may_become_nan)
            if mismatch:
                self.ok = False
                self.max_abs = self.max_rel = self.ratio = float("inf")
                self.failures.append(f"{what}: {mismatch}")
                self.pattern_failed = True
                return
            finite = torch.isfinite(ref32.detach()) & torch.isfinite(new.detach())
            if left_out is not None and left_out.shape == finite.shape and bool(left_out.any()):
                finite &= ~left_out.to(finite.device)
                self.left_out += int(left_out.sum())
            if not bool(finite.all()):
                new, ref32, ref64 = new.detach()[finite], ref32.detach()[finite], ref64.detach()[finite]
        elif left_out is not None and left_out.shape == new.shape == ref32.shape and bool(left_out.any()):
            keep = ~left_out.to(new.device)   # (KernelBench's replay: for the errors and the ratio)
            self.left_out += int(left_out.sum())
            if not plain_close and new.dtype == ref32.dtype:
                # Say where allclose failed: at a step of the reference, eager's GEMM and this
                # file's rounded to its two sides (no fp32 GEMM but eager's own lands where eager
                # does on every element), or elsewhere, where the numbers below say by how much.
                apart = ~torch.isclose(ref32.detach(), new.detach(), atol=self.tol, rtol=self.tol)
                at_step = int((apart & ~keep).sum())
                if at_step:
                    jump_note = (f"{at_step} of the {int(apart.sum())} element(s) apart from eager's sit at a "
                                 "jump of the reference, eager's GEMM and this file's rounding to its two sides")
            new, ref32, ref64 = new.detach()[keep], ref32.detach()[keep], ref64.detach()[keep]
        new64 = new.detach().double()
        ref64 = ref64.detach().double()
        scale = ref64.abs().max().item() if ref64.numel() else 0.0
        abs_err = (new64 - ref64).abs().max().item() if new64.numel() else 0.0
        if not math.isfinite(abs_err):
            abs_err = float("inf")
        self.max_abs = max(self.max_abs, abs_err)
        self.largest = max(self.largest, scale)
        if self.relative_to_largest:
            self.max_rel = self.max_abs / self.largest if self.largest > 0 else self.max_abs
        else:
            self.max_rel = max(self.max_rel, abs_err / scale if scale > 0 else abs_err)
        ref_err = (ref32.detach().double() - ref64).abs().max().item() if ref32.numel() else 0.0
        ref_err = max(ref_err, yardstick)
        self.ref_abs = max(self.ref_abs, ref_err)
        ratio = abs_err / max(ref_err, ULP_FP32 * scale, 1e-30)
        self.ratio = max(self.ratio, ratio)
        if self.displacements:
            close = new64.shape == ref64.shape and abs_err <= self.tol * scale + FP32_EXACT_FACTOR * ref_err
        elif self.gradients:
            close = new64.shape == ref64.shape and (
                abs_err <= self.tol * (1 + scale) or abs_err <= self.tol + FP32_EXACT_FACTOR * ref_err)
        elif self.judge_by_fp64:
            close = abs_err <= self.tol + (FP32_EXACT_FACTOR if self.fp32_exact else 2) * ref_err
        elif self.plain_allclose:
            # KernelBench's own call, argument order and dtypes included (its rtol scales with
            # the new output; a dtype mismatch raises there, a failure), on every element.
            close = plain_close
        else:
            close = self._close_to_eager(what, new64, ref32.detach().double(), ref64, new.dtype)
        if new.shape != ref32.shape or not close:
            self.ok = False
            closer = (f"; eager {self.eager} is itself {ref_err:.2e} from fp64, further than this file"
                      if new.shape == ref32.shape and ref_err > abs_err else "")
            self.failures.append(f"{what} differs (max abs {abs_err:.2e}){closer}"
                                 + (f" ({jump_note})" if jump_note else ""))
        elif self.fp32_exact and not ratio <= FP32_EXACT_FACTOR:
            self.ok = False
            self.failures.append(f"{what}: error {abs_err:.2e} is {ratio:.3g}x eager fp32's {ref_err:.2e} "
                                 f"(fp32-exact gate: <= {FP32_EXACT_FACTOR:g}x)")

    def _close_to_eager(self, what: str, new64, ref32_64, ref64, dtype=torch.float32) -> bool:
        """KernelBench's allclose against eager fp32, element by element, except that an element
        at least as close to fp64 as eager fp32's passes too. Eager fp32 stands in for the exact
        result; where it is itself more than tol from it (a row sum near 0 of 8192 rounded GEMM
        outputs: eager is 2-3e-4 from fp64 there), no rounding but eager's own is within tol of
        it, the exact result included, so those elements are judged against the exact result.
        In bf16 / fp16 an element one rounding step of its dtype further than eager's passes too:
        both round the result to the dtype, and a sum taken in another order lands on the
        neighbouring value. And there the tensor passes as a whole when its worst error is within
        HALF_ERROR_FACTOR times eager's worst plus a step: a sum of hundreds of rounded values
        lands a few steps from eager's on some rows, on either side of the exact value (measured
        on an H100: a bf16 row sum 5.6e-2 from fp64 where eager's worst was 5.1e-2, one row
        beyond 1e-2 of eager; KernelBench's eval accepts the file)."""
        if new64.shape != ref32_64.shape:
            return False
        near_eager = torch.isclose(new64, ref32_64, atol=self.tol, rtol=self.tol)
        if bool(near_eager.all()):
            return True
        # Where eager overflowed (inf for a finite exact value), its error is inf and would
        # excuse any value: there, only allclose.
        half = dtype in (torch.bfloat16, torch.float16)
        step = torch.finfo(dtype).eps * ref64.abs() if half else 0.0
        as_accurate = (torch.isfinite(ref32_64) & torch.isfinite(new64)
                       & ((new64 - ref64).abs() <= (ref32_64 - ref64).abs() + step))
        if not bool((near_eager | as_accurate).all()):
            if not (half and bool(torch.isfinite(new64).all())):
                return False
            worst, eager_worst = (new64 - ref64).abs().max().item(), (ref32_64 - ref64).abs().max().item()
            if not worst <= HALF_ERROR_FACTOR * eager_worst + torch.finfo(dtype).eps * ref64.abs().max().item():
                return False
            self.notes.append(f"{what}: {int((~(near_eager | as_accurate)).sum())} element(s) beyond tol of eager "
                              f"and further from fp64 than it; worst error {worst:.2e}, eager's {eager_worst:.2e}")
            return True
        self.notes.append(f"{what}: {int((~near_eager).sum())} element(s) beyond tol of eager fp32, "
                          "each at least as close to fp64 as eager's")
        return True

    def result(self, name: str) -> CheckResult:
        notes = self.notes + ([f"{self.left_out} output element(s) at a jump or kink of the reference left out"]
                              if self.left_out else [])
        detail = self.failures if not self.ok else notes
        return CheckResult(name, self.ok, self.max_abs, self.max_rel, self.ref_abs,
                           "; ".join(detail[:3]), error_ratio=self.ratio,
                           gate="fp32-exact" if self.fp32_exact else "", eager=self.eager)


def _value_text(v: float) -> str:
    return "NaN" if math.isnan(v) else (f"{v:g}" if math.isinf(v) else f"{v:.3g}")


def nonfinite_mismatch(new: torch.Tensor, ref32: torch.Tensor, ref64: torch.Tensor, tol: float,
                       nan_allowed: torch.Tensor | None = None,
                       infinities_may_become_nan: bool = False) -> str:
    """Where `new` is not NaN, +inf, -inf or finite exactly where eager (`ref32`) is, element by
    element, one line saying how many and the first of them ("" when the patterns agree): torch
    propagates NaN through every reduction (a row max that drops a NaN turns a diverging model's
    row into numbers), and an overflow to inf in eager must be inf in the candidate too.
    Exceptions: an element whose exact value (`ref64`) is within tol of the dtype's largest
    finite value (or beyond it) may be inf in one and a finite value within tol of that largest
    one (of the same sign) in the other, since rounding decides that; an element where eager
    overflowed to inf on the way (exp of a value at the dtype's edge) while the exact value is
    finite may be finite in the candidate if it is within tol of that exact value (it is the
    closer of the two; session 13 met one: log1p(exp(x)) at x = 88.72); where `nan_allowed` is True, or (with `infinities_may_become_nan`) where eager
    is infinite, NaN is accepted. Tensors of any floating dtype; all three of one shape."""
    new, ref32, ref64 = new.detach(), ref32.detach(), ref64.detach()
    nan_e, nan_n = torch.isnan(ref32), torch.isnan(new)
    inf_e, inf_n = torch.isinf(ref32), torch.isinf(new)
    same = (nan_e == nan_n) & (inf_e == inf_n) & (~inf_e | (torch.sign(ref32) == torch.sign(new)))
    largest = torch.finfo(ref32.dtype).max
    borderline = ((inf_e ^ inf_n) & ~nan_e & ~nan_n & (torch.sign(ref32) == torch.sign(new))
                  & (ref64.double().abs() * (1 + tol) >= largest)
                  & (torch.where(inf_e, new, ref32).double().abs() * (1 + tol) >= largest))
    exact = ref64.double()
    recovered = (inf_e & torch.isfinite(new) & torch.isfinite(exact)
                 & ((new.double() - exact).abs() <= tol * (1 + exact.abs())))
    ok = same | borderline | recovered
    if nan_allowed is not None:
        ok |= nan_allowed & nan_n
    if infinities_may_become_nan:
        ok |= inf_e & nan_n
    if bool(ok.all()):
        return ""
    bad = ~ok
    first = tuple(int(i) for i in bad.nonzero()[0])
    eager_v, new_v = ref32[first].item(), new[first].item()
    kind = "NaN" if math.isnan(eager_v) or math.isnan(new_v) else "inf"
    return (f"{kind} pattern differs at {int(bad.sum())} element(s): eager {_value_text(eager_v)}, "
            f"new {_value_text(new_v)} at {first}")


def fp32_exact_tier(tol: float) -> bool:
    """Whether passing at `tol` also requires the fp32-exact gate."""
    return tol <= FP32_EXACT_MAX_TOL


def gate_description(tol: float) -> str:
    """What passing at `tol` means, as emitted headers and reports state it."""
    if fp32_exact_tier(tol):
        return (f"fp32-exact (error vs fp64 <= {FP32_EXACT_FACTOR:g}x eager fp32's on every check) "
                f"and allclose(atol=rtol={tol:g})")
    return f"allclose(atol=rtol={tol:g}) only (not fp32-exact)"


class Trio:
    """ModelNew and the reference in the module's dtype (fp32, or bf16 / fp16 as module.to(dtype)
    makes them), and an fp64 copy of the reference holding the same (rounded) values."""

    def __init__(self, f: EmittedFile, device, seed: int = 0, momentum_none: bool = False,
                 dtype: torch.dtype = torch.float32):
        # Built on the GPU: initializing 8192x8192 Linear layers on the CPU dominated the checks.
        with torch.device(device):
            torch.manual_seed(seed)
            self.ref = f.Model(*f.init_args()).to(dtype)
            torch.manual_seed(seed)
            self.new = f.ModelNew(*f.init_args()).to(dtype)
            # (each Dropout mask drawn as the module's dtype draws it: kgen/check/masks.py)
            self.ref64 = masks_drawn_in(f.Model(*f.init_args()).double(), dtype, getattr(f, "dropouts", ()))
        # (its extra inputs, where get_inputs() gives any, the module dtype's values: x.double()'s kind)
        self.ref64.kgen_extra_inputs_through = dtype
        self.dtype = dtype
        self.ref64.load_state_dict(self.ref.state_dict())
        self.new.load_state_dict(self.ref.state_dict())
        self.train(f.runs_in_training)
        self.may_jump = may_jump(f)
        if momentum_none:
            for m in self.models():
                for bn in batchnorms(m):
                    bn.momentum = None

    def models(self):
        return (self.new, self.ref, self.ref64)

    def train(self, mode: bool):
        for m in self.models():
            m.train(mode)

    def call(self, x: torch.Tensor, cmp: Comparison, what: str,
             nan_allowed: dict[str, torch.Tensor] | None = None, extras: list | None = None):
        """One forward of all three on x; compares outputs, buffers, and that x is untouched.
        `nan_allowed`: per "output" or buffer name, where ModelNew may be NaN whatever eager is.
        `extras`: get_inputs()' tensors after the input, in the module's dtype, where the check
        varies them as it varies x (_extra_inputs); None: as drawn (Reference.extra_inputs_for).
        Eager fp32's output and buffers stay in `last_eager` (keyed the same way)."""
        nan_allowed = nan_allowed or {}
        before = [t.clone() for t in [x, *(extras or ())]]
        ref_model, new_model, ref64_model = self.ref, self.new, self.ref64
        if extras:
            ref_model, new_model = _Given(self.ref, extras), _Given(self.new, extras)
            ref64_model = _Given(self.ref64, [e.double() for e in extras])
        # Each forward starts from one RNG state: a Dropout in training mode draws the same mask
        # in all three (ModelNew draws torch's own, kgen.frontend.trace.Tracer.dropout).
        rng = torch.cuda.get_rng_state(x.device)
        jumps = jump_mask(ref64_model, x.double(), lambda: torch.cuda.set_rng_state(rng, x.device)) \
            if self.may_jump else None
        torch.cuda.set_rng_state(rng, x.device)
        with torch.no_grad():
            ref = ref_model(x)
            torch.cuda.set_rng_state(rng, x.device)
            ref64 = ref64_model(x.double())
            _poison_allocator(ref.numel(), x.device)   # the block ModelNew's output will get
            torch.cuda.set_rng_state(rng, x.device)
            out = new_model(x)
        torch.cuda.synchronize()
        cmp.add(f"{what} output", out, ref, ref64, nan_allowed.get("output"), jumps)
        self.last_eager = {"output": ref}
        new_buffers = dict(self.new.named_buffers())
        ref64_buffers = dict(self.ref64.named_buffers())
        for name, buf in self.ref.named_buffers():
            if buf.is_floating_point():
                cmp.add(f"{what} {name}", new_buffers[name], buf, ref64_buffers[name], nan_allowed.get(name))
                self.last_eager[name] = buf.clone()
            elif not torch.equal(new_buffers[name], buf):
                cmp.ok = False
                cmp.failures.append(f"{what} {name} differs")
        if not all(_same_values(b, t) for b, t in zip(before, [x, *(extras or ())])):
            cmp.ok = False
            cmp.failures.append(f"{what} modified its input")
        return out


def _reference_nodes(f) -> list:
    """The IR nodes of the reference's every GEMM part ([] where it has no IR: a cuBLAS-only file
    of an older kgen); traced once per file (every check's Trio asks)."""
    if "_reference_nodes" not in f.__dict__:
        try:
            graph = trace(f.reference)
            f._reference_nodes = [n for part in graph.parts for n in part.nodes]
        except Exception:  # noqa: BLE001 - no IR: nothing the checks below would use
            f._reference_nodes = []
    return f._reference_nodes


def may_jump(f) -> bool:
    """Whether the reference's function may jump (a torch.where, whose branches may differ at its
    condition's boundary, or a rounding: ops.JUMPING): its forward checks then leave out the
    output elements at a jump (kinks.jump_mask)."""
    return any(n.op in JUMPING for n in _reference_nodes(f))


def may_kink(f) -> bool:
    """Whether the reference's function may have a kink (or a jump): some node of its IR is not
    smooth (graph.smooth), or it has no IR. Only then do the gradient checks look for the output
    elements at one (kinks.kink_free_gradient; a module of smooth ops has none to find, and the
    look costs seconds at KernelBench's sizes: 2.3 s of a 1024 x 8192 -> 8192 module's full
    validation on an H100)."""
    nodes = _reference_nodes(f)
    return not nodes or not all(smooth(n) for n in nodes)


def functional_batchnorm(f) -> bool:
    """Whether the reference's BatchNorm is F.batch_norm on the module's tensors (which takes no
    momentum=None: the check with the modules' momentum set to None cannot run the reference)."""
    return any(n.kind == "batchnorm" and n.attrs.get("counts", True) is False for n in _reference_nodes(f))


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal, NaN equal to NaN (an input poisoned with NaN is unchanged if still NaN)."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))


def batchnorms(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


def _poison_allocator(numel: int, device):
    """Fill a block of the output's size with NaN and free it: the caching allocator hands the
    same memory to the next allocation of that size, so an unwritten output element shows as NaN."""
    block = torch.full((numel,), float("nan"), device=device)
    del block


def _inputs(f, kind: str, batch: int, device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An input of `batch` rows in `dtype`: "rand" is the reference's own get_inputs() (whatever
    it draws), "randn" standard normal and "offset" uniform plus LARGE_OFFSET, of its shape."""
    if kind == "rand":
        x = f.reference.inputs(batch)[0]   # (the tensors after it: Reference.given_extra_inputs)
        return x.to(device, dtype)
    # (The shape alone: get_inputs() draws on the CPU, 40 ms for 1024 x 8192.)
    shape = (batch, *f.reference.input.shape[1:])
    if kind == "randn":
        return torch.randn(shape, device=device).to(dtype)
    if kind == "offset":
        return (torch.rand(shape, device=device) + LARGE_OFFSET).to(dtype)
    raise ValueError(kind)


def _extra_inputs(f, x: torch.Tensor, kind: str) -> list[torch.Tensor] | None:
    """get_inputs()' tensors after the input for a check's call on x, drawn as x is (`kind`,
    _inputs): "rand" the reference's own draws (None: the models take them themselves,
    Reference.extra_inputs_for), "randn" and "offset" of their shapes; None where there are none."""
    if kind == "rand" or not f.reference.extra_inputs:
        return None
    shapes = [(x.shape[0], *t.shape[1:]) for t in f.reference.extra_inputs]
    if kind == "randn":
        return [torch.randn(shape, device=x.device).to(x.dtype) for shape in shapes]
    if kind == "offset":
        return [(torch.rand(shape, device=x.device) + LARGE_OFFSET).to(x.dtype) for shape in shapes]
    raise ValueError(kind)


def _run(name: str, body: Callable[[], CheckResult]) -> CheckResult:
    """A check that raises is a failed check, with the first line of the error as its detail."""
    try:
        return body()
    except Exception as e:  # noqa: BLE001 - any failure of the candidate is data
        first = (str(e).strip().splitlines() or [""])[0]
        return CheckResult(name, False, detail=f"{type(e).__name__}: {first}", crashed=True)


def cuda_context_lost() -> bool:
    """True when the CUDA context no longer runs work (a sticky error such as an illegal
    address): every later CUDA call in this process would fail with the same error."""
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return False
    except Exception:  # noqa: BLE001 - torch raises RuntimeError or AcceleratorError
        return True


NOT_RUN = "not run: CUDA context lost"
NOT_RUN_AFTER_FAILURE = "not run: an earlier check failed"


def _train_check(f, device, tol, kind, batch, trials, judge_by_fp64=False, momentum_none=False,
                 dtype=torch.float32):
    def body():
        trio = Trio(f, device, momentum_none=momentum_none, dtype=dtype)
        cmp = Comparison(tol, judge_by_fp64)
        for t in range(trials):
            x = _inputs(f, kind, batch, device, dtype)
            trio.call(x, cmp, f"call {t}", extras=_extra_inputs(f, x, kind))
        return cmp.result("")
    return body


def _named(name, body):
    def run():
        r = body()
        r.name = name
        return r
    return _run(name, run)


def check_static(f: EmittedFile) -> CheckResult:
    problems = check_emitted(f.source)
    return CheckResult("static rules (kgen's and KernelBench's)", not problems, detail="; ".join(problems[:3]))


def check_construction(f: EmittedFile, device) -> CheckResult:
    # On the GPU: the same seeded construction code runs as on the CPU (KernelBench's way, which
    # check_kernelbench_eval follows), in milliseconds where two 8192 x 8192 Linear layers took
    # 1.4 s of every candidate's quick tier on the CPU (docs/perf.md, session 10).
    with torch.device(device):
        torch.manual_seed(1)
        ref = f.Model(*f.init_args())
        torch.manual_seed(1)
        new = f.ModelNew(*f.init_args())
    a, b = ref.state_dict(), new.state_dict()
    if a.keys() != b.keys():
        return CheckResult("seeded construction, state_dict", False,
                           detail=f"state_dict keys differ: {sorted(a.keys() ^ b.keys())}")
    same = all(torch.equal(a[k], b[k]) for k in a)
    new.load_state_dict(ref.state_dict())
    ref.load_state_dict(new.state_dict())
    return CheckResult("seeded construction, state_dict", same,
                       detail="" if same else "seeded parameters differ")


def check_eval(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    trio = Trio(f, device, dtype=dtype)
    cmp = Comparison(tol)
    for t in range(2):  # move the running statistics away from their initial values
        trio.call(_inputs(f, "rand", batch, device, dtype), Comparison(tol), "warm")
    trio.train(False)
    for t in range(2):
        trio.call(_inputs(f, "rand", batch, device, dtype), cmp, f"eval {t}")
    return cmp.result("eval mode")


def _seed_all(seed: int):
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def check_kernelbench_eval(f, device, tol, dtype=torch.float32) -> CheckResult:
    """KernelBench's correctness check as its eval runs it, at the reference's own get_inputs():
    Model and ModelNew each built on the CPU right after seeding 42 (nothing copied between
    them: seeded construction alone must give both the same parameters), moved to the GPU and
    left in training mode; five trials, each seeding with the trial's seed before the
    reference's get_inputs(), both forwards under no_grad, allclose(atol=rtol=tol). At its bf16 /
    fp16 precision both models and the inputs are converted with .to(dtype), as its eval does. An
    fp64 copy of the (converted) reference gives the errors reported beside it."""
    _seed_all(KERNELBENCH_SEED)
    ref = f.Model(*f.init_args())
    _seed_all(KERNELBENCH_SEED)
    new = f.ModelNew(*f.init_args())
    ref, new = ref.to(device, dtype), new.to(device, dtype)
    ref64 = copy.deepcopy(ref).double()
    torch.manual_seed(KERNELBENCH_SEED)
    seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(KERNELBENCH_TRIALS)]
    cmp = Comparison(tol, plain_allclose=True)
    jumpy = may_jump(f)
    for t, seed in enumerate(seeds):
        _seed_all(seed)
        # (every tensor of get_inputs(), as KernelBench calls model(*inputs))
        x, *extras = [v.to(device, dtype) for v in f.reference.draw()]
        with torch.no_grad():
            out32, out64, out = ref(x, *extras), ref64(x.double(), *(e.double() for e in extras)), new(x, *extras)
        # (the fp32-exact ratio leaves out the elements at a jump of the reference, as the other
        # forward checks do; KernelBench's allclose judges them all)
        jumps = jump_mask(_Given(ref64, [e.double() for e in extras]), x.double()) if jumpy else None
        cmp.add(f"trial {t} (seed {seed})", out, out32, out64, left_out=jumps)
    return cmp.result(KERNELBENCH_CHECK)


class _Given(torch.nn.Module):
    """`model` called with x alone as with x and these tensors after it (get_inputs()' own draws,
    where a check that calls x alone, jump_mask, must see them rather than
    Reference.extra_inputs_for's); its buffers are the model's."""

    def __init__(self, model: torch.nn.Module, extras: list):
        super().__init__()
        self.model, self.extras = model, extras

    def forward(self, x):
        return self.model(x, *self.extras)


KERNELBENCH_CHECK = f"KernelBench's eval (seed {KERNELBENCH_SEED}, {KERNELBENCH_TRIALS} trials)"


def check_weights_change(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    trio = Trio(f, device, dtype=dtype)
    cmp = Comparison(tol)
    x = _inputs(f, "rand", batch, device, dtype)
    trio.call(x, cmp, "before")
    # Like an optimizer step: a random update of every parameter, the same for all three models.
    # (A constant added to every weight would instead give z a large common offset, an
    # ill-conditioned GEMM that the offset check covers on its own terms.)
    gen = torch.Generator(device=device).manual_seed(7)
    with torch.no_grad():
        for name, p in trio.ref.named_parameters():
            scale = 0.1 / p.shape[-1] ** 0.5 if p.dim() == 2 else 0.25
            delta = scale * torch.randn(p.shape, device=device, generator=gen)
            for m in trio.models():
                q = m.get_parameter(name)
                if p.dim() == 2:
                    q.mul_(-0.5)
                q.add_(delta.to(q.dtype))
    trio.call(x, cmp, "after in-place update")
    trio.train(False)
    trio.call(x, cmp, "after, eval")
    return cmp.result("weights changed in place")


def check_noncontiguous(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    trio = Trio(f, device, dtype=dtype)
    cmp = Comparison(tol)
    x = torch.rand(f.spec.in_features, batch, device=device).to(dtype).t()
    trio.call(x, cmp, "transposed view")
    base = torch.rand(batch * f.spec.in_features + 1, device=device).to(dtype)
    trio.call(base[1:].view(batch, f.spec.in_features), cmp, "misaligned view")
    return cmp.result("non-contiguous / misaligned input")


# Math modes that split each operand into a big and a small part (3xTF32): an infinite operand's
# small part is inf - inf = NaN, and a big * small product of opposite signs meets the big *
# big one as inf - inf, so an infinity in the input comes out NaN wherever it reaches (as in
# CUTLASS's 3xTF32). A NaN in its place shows where that is.
SPLIT_OPERAND_MATHS = ("tf32x3",)


def _poisoned_positions(batch: int, features: int) -> list[tuple[int, int]]:
    """Two elements of an input in two different rows (one mid-tile, one in the last rows)."""
    return [(batch // 3, features // 5), (max(batch - 2, 0), max(features - 3, 0))]


def check_nonfinite_inputs(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    """NaN, then +inf and -inf, in two rows of the input: ModelNew's output (and buffers) must be
    NaN, +inf, -inf and finite exactly where eager fp32's are (nonfinite_mismatch), the finite
    elements within the gate. In training mode with BatchNorm, a clean call then an eval call
    after the NaN one: the running statistics stay poisoned as torch's do. Each case starts
    from a fresh Trio (a poisoned running statistic would carry into the next)."""
    x = _inputs(f, "rand", batch, device, dtype)
    positions = _poisoned_positions(*x.shape)
    cmp = Comparison(tol)
    trio = Trio(f, device, dtype=dtype)
    nan_x = x.clone()
    for r, c in positions:
        nan_x[r, c] = float("nan")
    trio.call(nan_x, cmp, "NaN input")
    reached = {name: torch.isnan(t) for name, t in trio.last_eager.items()}
    if f.has_batchnorm and f.runs_in_training:
        trio.call(x, cmp, "clean input after NaN")
        trio.train(False)
        trio.call(x, cmp, "eval after NaN")
    trio = None   # (the NaN case's three models go before the next three are built)
    trio = Trio(f, device, dtype=dtype)
    inf_x = x.clone()
    for (r, c), value in zip(positions, (float("inf"), float("-inf"))):
        inf_x[r, c] = value
    cmp.infinities_may_become_nan = True
    split = getattr(f.spec, "math", None) in SPLIT_OPERAND_MATHS
    trio.call(inf_x, cmp, "Inf input", nan_allowed=reached if split else None)
    # get_inputs()' tensors after the input (a residual, a gate, read after the GEMM) poisoned
    # alike, each alone, at the same rows: a NaN, then +inf and -inf (no split GEMM reads them)
    for k, (what, extra) in enumerate(zip(f.spec.graph().extra_input_names, f.reference.extra_inputs_for(x))):
        for label, values in (("NaN", (float("nan"),) * 2), ("Inf", (float("inf"), float("-inf")))):
            trio = None
            trio = Trio(f, device, dtype=dtype)
            extras = [t.clone() for t in f.reference.extra_inputs_for(x)]
            for (r, c), value in zip(_poisoned_positions(*extra.shape), values):
                extras[k][r, c] = value
            trio.call(x, cmp, f"{label} in {what}", extras=extras)
    cmp.infinities_may_become_nan = False
    return cmp.result("NaN and Inf in input rows")


def check_nan_parameters(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    """A NaN in one element of each parameter in turn (a fresh Trio each time), one call in the
    module's mode (and, with BatchNorm in training, one in eval mode after it): the NaN must
    reach exactly the elements and buffers it reaches in eager fp32. (kgen folds a Linear bias
    out of training-mode BatchNorm: a NaN there must still poison the column.)"""
    x = _inputs(f, "rand", batch, device, dtype)
    cmp = Comparison(tol)
    trio = Trio(f, device, dtype=dtype)
    names = [name for name, p in trio.ref.named_parameters() if p.is_floating_point()]
    for i, name in enumerate(names):
        if i:
            trio = None   # (one parameter's three models go before the next three are built)
            trio = Trio(f, device, dtype=dtype)
        with torch.no_grad():
            for m in trio.models():
                q = m.get_parameter(name)
                q.view(-1)[q.numel() // 3] = float("nan")
            del m, q   # (the fp64 model would outlive `trio = None` below)
        trio.call(x, cmp, f"NaN in {name}")
        if f.has_batchnorm and f.runs_in_training:
            trio.train(False)
            trio.call(x, cmp, f"NaN in {name}, then eval")
    return cmp.result("NaN in each parameter")


# Scales of the reference's own inputs for the magnitude sweep: with KernelBench's inputs and
# Linear initialization the GEMM output is O(1), so the logits reach ~1e1 .. 1e4, past where
# exp overflows (88.7 in fp32), tanh, erf and sigmoid saturate and softplus switches to x.
MAGNITUDES = (1e1, 1e2, 1e3, 1e4)
MAGNITUDE_CHECK = f"inputs x {MAGNITUDES[0]:g} .. {MAGNITUDES[-1]:g} (vs fp64)"


def check_magnitudes(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    """The inputs scaled by each of MAGNITUDES, judged against fp64 as the offset check is
    (error <= tol + the gate's factor times eager fp32's at the fp32-exact tier, where the ratio
    gate applies too); the non-finite pattern must be eager's (an overflow to inf in eager is
    inf in ModelNew, a softmax that does not subtract its row max gives NaN where eager is
    finite). A module with BatchNorm runs in eval mode with its initial running statistics,
    which pass the magnitudes through (batch statistics would normalize them away). At the
    loose tiers (tol >= OFFSET_GATES_BELOW_TOL) a TF32 or BF16 GEMM's relative error times
    logits of 1e4 is beyond any absolute tolerance (cuBLAS's as much as kgen's): there only the
    pattern gates and the numbers are reported."""
    trio = Trio(f, device, dtype=dtype)
    if f.has_batchnorm:
        trio.train(False)
    cmp = Comparison(tol, judge_by_fp64=True)
    for scale in MAGNITUDES:
        # (get_inputs()' tensors after the input, a residual, scaled alike)
        x = _inputs(f, "rand", batch, device, dtype)
        extras = [t * scale for t in f.reference.extra_inputs_for(x)] or None
        trio.call(x * scale, cmp, f"x * {scale:g}", extras=extras)
    r = cmp.result(MAGNITUDE_CHECK)
    if tol >= OFFSET_GATES_BELOW_TOL and not r.passed and not cmp.pattern_failed:
        r.passed = True
        r.detail = f"reported, not gating at tol {tol:g} (only the NaN/Inf pattern): {r.detail}"
    return r


def has_backward(f: EmittedFile) -> bool:
    """Whether every GEMM part of the file has a backward (kernels, or a constant output's zero
    gradients; else backward() raises)."""
    ops = getattr(f.module, "_KGEN_BACKWARD_OPS", None)
    return bool(ops) and all(op is not None for op in ops)


def _gradients(model, x, g, rng: torch.Tensor):
    """dL/dx and every parameter's gradient (kinks.gradients); the forward starts from the CUDA
    RNG state `rng` (a Dropout in training mode draws the same mask in each model, as in
    Trio.call)."""
    return gradients(model, x, g, lambda: torch.cuda.set_rng_state(rng, x.device))


# torch.set_float32_matmul_precision for eager's GEMMs at a relaxed tier's math: the yardstick of
# a TF32 file's gradients and training steps is eager in that math (see check_gradients). For bf16
# and fp16 products torch has no fp32 GEMM: "medium" is TF32 on CUDA (torch's docs), 8x nearer fp64
# than bf16 products (measured on an H200: a bf16 file's BatchNorm scale moved 129x eager TF32's
# error off fp64 in the training check, 1.00x eager's on bf16-rounded operands;
# docs/experiments/s46/train_yardstick.py). There eager's GEMMs take their operands rounded to the
# math (rounding.gemm_operands_rounded), under "high": TF32 holds every bf16 and fp16 value
# exactly, so the products are exact and summed in fp32, as kgen's kernel sums them. A GEMM the
# file runs otherwise (kgen's wgmma bf16 / fp16: TF32 at K % 8 != 0, configs.gemm_math; fp32
# products at a few rows) is left unrounded, and a wgmma file's gradients are the unrounded
# operands', as its TF32 backward GEMMs compute them (the cuBLAS and mma.sync files' backward
# GEMMs run the math's products: the rounded operands').
EAGER_MATMUL_PRECISION = {"tf32": "high", "bf16": "high", "fp16": "high"}


@contextlib.contextmanager
def eager_matmul_math(math: str, family: str = ""):
    """eager's fp32 GEMMs in the math of a file of GEMM `family` while the yardstick runs: TF32,
    or bf16 / fp16 products of rounded operands where the file runs them. The rounding flips z's sign near a kink (ReLU, LeakyReLU) and
    moves the gradient there by the kink's jump, in eager's TF32 as in kgen's (measured on an
    H100: a cuBLAS TF32 file's LeakyReLU bias gradient 3.1 from fp64 over 257 rows, eager fp32's
    5.6e-5); fp32 math is left as it is."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(EAGER_MATMUL_PRECISION.get(math, before))
    try:
        def rounds(k: int, m: int) -> bool:
            """Whether the file's GEMM of k for m rows runs the math's products: not a wgmma file's
            at K % 8 != 0 (TF32: configs.gemm_math), nor at most SKINNY_MAX_ROWS rows, which its
            round16 GEMM hands to the few-row GEMM of fp32 products (gemm_wgmma_round16.cuh)."""
            return gemm_math(family, math, k) == math and not (family == "wgmma" and m <= SKINNY_MAX_ROWS)

        mode = (gemm_operands_rounded(math, rounds=rounds, unrounded_gradients=family == "wgmma")
                if math in ROUND16_MATHS else contextlib.nullcontext())
        with mode:
            yield
    finally:
        torch.set_float32_matmul_precision(before)


def check_gradients(f, device, tol, batch, training: bool, dtype=torch.float32) -> CheckResult:
    """dL/dx and every parameter's gradient, for a random dL/dy, against fp64 autograd of the
    reference, with eager's beside them (in the module's dtype; for an fp32 module of a TF32,
    BF16 or FP16 file, eager's GEMMs in that math: eager_matmul_math) (Comparison's `gradients` judge:
    within tol of its largest value, or error <= tol + the gate's factor times eager's; at the
    fp32-exact tier the ratio too). Output elements at a kink of the reference (kinks.py: an fp32
    result's sign there, eager's included, is a coin toss) get no gradient.
    A file without backward kernels must say so when backward() runs."""
    name = f"gradients, {'train' if training else 'eval'} mode"
    trio = Trio(f, device, dtype=dtype)
    trio.train(training)
    x = _inputs(f, "rand", batch, device, dtype)
    if not has_backward(f):
        try:
            trio.new(x.clone().requires_grad_()).sum().backward()
        except RuntimeError as e:
            ok = "kgen: this ModelNew has no backward" in str(e)
            return CheckResult(name, ok, detail=f"not checked: {e}" if ok else f"backward() raised {e}")
        return CheckResult(name, False, detail="backward() ran although the file has no backward kernels")
    none = _without_gradient(trio, x, name) or _reference_backward_raises(trio, x, name)
    if none is not None:
        return none
    rng = torch.cuda.get_rng_state(x.device)
    reset = lambda: torch.cuda.set_rng_state(rng, x.device)   # noqa: E731 - one Dropout mask for every forward
    shape = output_shape(trio.ref64, x.double(), reset)
    # (rounded to the module's dtype, as the models take it: the fp64 judge gets the same g)
    g = torch.randn(shape, device=device, generator=torch.Generator(device=device).manual_seed(5)).to(dtype).float()
    # Output elements at a kink of the reference get no gradient (kgen/check/kinks.py).
    g, kink_note = kink_free_gradient(trio.ref64, x.double(), g, tol, reset) if may_kink(f) else (g, "")
    cmp = Comparison(tol, relative_to_largest=True, gradients=True)
    new = _gradients(trio.new, x, g, rng)
    with eager_matmul_math(f.spec.math if dtype == torch.float32 else "", f.spec.family):
        ref = _gradients(trio.ref, x, g, rng)
    ref64 = _gradients(trio.ref64, x.double(), g, rng)
    names = ["input"] + [n for n, _ in trio.new.named_parameters()]
    for what, a, b, c in zip(names, new, ref, ref64):
        cmp.add(f"dL/d({what})", a, b, c)
    if f.reference.extra_inputs:   # get_inputs()' tensors after the input: their gradients too
        with eager_matmul_math(f.spec.math if dtype == torch.float32 else "", f.spec.family):
            ref = extra_input_gradients(f, trio.ref, x, g, rng)
        for what, a, b, c in zip(f.spec.graph().extra_input_names, extra_input_gradients(f, trio.new, x, g, rng),
                                 ref, extra_input_gradients(f, trio.ref64, x.double(), g, rng, dtype)):
            cmp.add(f"dL/d({what})", a, b, c)
    return _with_note(cmp.result(name), kink_note)


def extra_input_gradients(f, model, x, g, rng: torch.Tensor, through=None) -> list[torch.Tensor]:
    """The gradient of each of get_inputs()' tensors after the input (zeros where none flows: one
    read detached), `model` called on x and them (Reference.extra_inputs_for, rounded `through`
    the module's dtype for the fp64 copy) from the CUDA RNG state `rng`; its buffers as they were."""
    leaves = [e.detach().clone().requires_grad_() for e in f.reference.extra_inputs_for(x, through)]
    with torch.enable_grad(), _BuffersKept(model):
        torch.cuda.set_rng_state(rng, x.device)
        y = model(x, *leaves)
        found = torch.autograd.grad(y, leaves, g.to(y.dtype), allow_unused=True)
    return [torch.zeros_like(leaf) if d is None else d for d, leaf in zip(found, leaves)]


def _without_gradient(trio: "Trio", x: torch.Tensor, name: str) -> CheckResult | None:
    """Where the reference's output carries no gradient (its forward detaches it, or runs under
    torch.no_grad()): ModelNew's must carry none either (a backward through it raises, as the
    reference's does); there is nothing else to compare. None: the output has a gradient."""
    def carries(model, x):
        with torch.enable_grad(), _BuffersKept(model):
            return bool(model(x.detach().clone().requires_grad_()).requires_grad)
    if carries(trio.ref64, x.double()):
        return None
    if carries(trio.new, x):
        return CheckResult(name, False, detail="ModelNew's output carries a gradient the reference's does not")
    return CheckResult(name, True, detail="not checked: the reference's output carries no gradient, nor does ModelNew's")


# autograd's words where an in-place op wrote a value the backward saved: the reference's own
# backward cannot run, for any input.
IN_PLACE_BACKWARD_ERROR = "modified by an inplace operation"


def _reference_backward_raises(trio: "Trio", x: torch.Tensor, name: str) -> CheckResult | None:
    """Where the reference's own backward raises autograd's in-place error (IN_PLACE_BACKWARD_ERROR):
    there is no gradient to judge ModelNew's against, and the check says so, with what ModelNew's
    backward did. None: the reference's backward runs, or raises something else (out of memory,
    a CUDA error), which the check reports as it raises it: no reason to leave ModelNew unjudged."""
    def raised(model, x) -> str | None:
        with _BuffersKept(model):
            try:
                y = model(x)
                gradients(model, x, torch.ones(y.shape, dtype=torch.float32, device=x.device))
            except RuntimeError as e:
                return str(e).splitlines()[0]
        return None
    theirs = raised(trio.ref64, x.double())
    if theirs is None or IN_PLACE_BACKWARD_ERROR not in theirs:
        return None
    ours = raised(trio.new, x)
    said = "ModelNew's computes gradients" if ours is None else f"ModelNew's raises too ({ours})"
    return CheckResult(name, True, detail=f"not checked: the reference's own backward raises ({theirs}); {said}")


def _with_note(r: CheckResult, note: str) -> CheckResult:
    """`note` added to the result's detail (a passing check's detail holds its notes)."""
    if note:
        r.detail = "; ".join(d for d in (r.detail, note) if d)
    return r


TRAIN_STEPS = 20
# Every parameter that has a gradient must move, in the fp64 run, by at least this many times
# the comparison's threshold for it (tol times 1 + its largest value): a file whose update is
# wrong, or missing, then cannot pass. Each parameter's learning rate is set from its first fp64
# gradient so that one step moves it by TRAIN_STEP_MARGIN times its share of that.
# The threshold that sizes the moves is the fp32-exact tier's at every tier (train_step_tol):
# at a relaxed tier's 1e-2, steps of TRAIN_STEP_MARGIN x TRAIN_MOVE_FACTOR x tol in all would move
# a parameter by a third of its size, and BatchNorm and softmax turn such steps chaotic (measured
# on an H100, Linear -> BatchNorm -> softmax at 1000x1000->1000: eager fp32 itself ended 0.95 from
# the fp64 run). The moves are then judged at the tier's own tol.
TRAIN_MOVE_FACTOR = 10
TRAIN_STEP_MARGIN = 3
# A parameter whose fp64 gradient is below this fraction of the largest one has none in exact
# arithmetic (a Linear bias under training-mode BatchNorm cancels): it gets no step.
NO_GRADIENT = 1e-10
# No step moves a parameter by more than this many times its first step's move (the fp64 run's
# gradient, one factor per parameter and step, taken by every run alike: a learning-rate schedule,
# not a clip of each run's own step). sum(G * y) has no minimum: where a gradient grows with the
# moves (the first GEMM's, through the second's weight, in Linear -> sigmoid -> Linear ->
# logsumexp), fixed rates run the loss away, the outputs grew 7 -> ~2900 over the 20 steps and
# every fp32 run's distance from fp64 turned chaotic (0.1-0.8, one eager sample as the yardstick:
# docs/experiments/s22/train_drift.py, docs/perf.md, sessions 22-23).
TRAIN_STEP_CAP = 2.0


def step_rates(rates: dict[str, float], first: dict[str, float], now: dict[str, float]) -> dict[str, float]:
    """This step's learning rate for each parameter: its rate, scaled down where the fp64 run's
    largest gradient `now` exceeds TRAIN_STEP_CAP times the first step's `first`."""
    return {name: rate * min(1.0, TRAIN_STEP_CAP * first[name] / now[name]) if rate and now[name] > 0 else rate
            for name, rate in rates.items()}


TRAINING_CHECK = f"training, {TRAIN_STEPS} steps"


def train_step_tol(tol: float) -> float:
    return min(tol, FP32_EXACT_MAX_TOL)


def check_training(f, device, tol, batch, dtype=torch.float32) -> CheckResult:
    """TRAIN_STEPS steps of gradient descent on sum(G * y), G a fixed standard normal tensor
    (dL/dy = G: gradients O(1) per element of y, summed over the batch, however large y
    grows), one fixed batch, each parameter with its own learning rate (see TRAIN_MOVE_FACTOR),
    scaled down at a step where the fp64 run's gradient grew past TRAIN_STEP_CAP times its first;
    the fp64 run trains, and at every step ModelNew, eager fp32 (its GEMMs in a TF32 / BF16 / FP16
    file's math: eager_matmul_math) and a second eager run that rounds differently
    (_second_eager) start from its parameters and buffers and take the same step. Every step's
    output is judged as an output (a fault in the forward fails here too); at the end, each
    fp32 run's steps added up, parameter by parameter and buffer by buffer, against the fp64
    run's whole move, within tol of the largest move plus the gate's factor times the larger
    error of the two eager runs (Comparison's `displacements` judge). The check
    fails itself where the fp64 run did not move a parameter that has a gradient enough to
    judge it. Each step's loss leaves out the output elements at a kink of the fp64 model then
    (kinks.py)."""
    if not has_backward(f):
        return CheckResult(TRAINING_CHECK, True, detail="not checked: the file has no backward kernels")
    if dtype != torch.float32:
        # (Its learning rates move each parameter 30x tol: at a 16-bit tier's 1e-2 that is a third
        # of a parameter's size per run, not a small step; the gradients check covers the backward.)
        return CheckResult(TRAINING_CHECK, True, detail=f"not run for a {str(dtype)[6:]} module")
    try:
        r, short, judged = _training_run(f, device, tol, batch, {})
    except RuntimeError as e:
        # (autograd's words for a loss with no gradient: the module's output carries none)
        none = "does not require grad" in str(e) and _without_gradient(
            Trio(f, device), _inputs(f, "rand", batch, device, dtype), TRAINING_CHECK)
        if none:
            return none
        raises = _reference_backward_raises(Trio(f, device), _inputs(f, "rand", batch, device, dtype), TRAINING_CHECK)
        if raises is not None:
            return raises
        raise
    if short and judged and all(need <= TRAIN_RATE_RETRY_MAX for need in short.values()):
        # A rate is set from the first step's gradient; where that gradient shrank or turned as
        # the parameters moved, the fp64 run moved the parameter less than the check needs
        # (measured on an H100: KernelBench 30's Linear bias before GroupNorm at 128 rows moved
        # 0.56x of it). One more run, that parameter's rate scaled to the shortfall, only where
        # the first run failed for that alone (its outputs and moves all within the gate) and
        # the shortfall is a few times, not orders of magnitude.
        r, _, _ = _training_run(f, device, tol, batch, {name: TRAIN_STEP_MARGIN * need for name, need in short.items()})
    return r


# The largest shortfall (needed / moved) of a parameter's move that gets the training check a
# second run with its rate scaled up.
TRAIN_RATE_RETRY_MAX = 10.0


def _floating_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's floating-point parameters and buffers, copied to host memory."""
    return {k: v.detach().to("cpu", copy=True) for k, v in (dict(model.named_parameters()) | dict(model.named_buffers())).items()
            if v.is_floating_point()}


def _second_eager(f, ref: torch.nn.Module, x: torch.Tensor):
    """The training check's second eager run (see _training_run): a copy of the eager model that
    computes the same function with another rounding, (model, its input, {weight path: (the
    order its features are taken in, the weight's dimension of them)}). Its first GEMM sums over
    the input features in another order (the features of x and the columns of the weight permuted
    alike: x Wᵀ is the same sum, taken as another GEMM would take it); where the module reads its
    input again after the GEMM (a residual, which the permutation would scramble), has no IR, or
    computes its first GEMM's weight (graph.stored_weight), its input is moved by a rounding
    instead (x (1 + 2^-22 r))."""
    def moved_by_a_rounding():
        noise = torch.randn(x.shape, device=x.device, generator=torch.Generator(device=x.device).manual_seed(5))
        return _copy_of(f, ref), x * (1 + 2.0 ** -22 * noise), {}

    nodes = _reference_nodes(f)
    gemms = [n for n in nodes if n.kind == "gemm"]
    weights = [n.attrs["weight"] for n in gemms]
    # (a prologue, ops on the input before the first GEMM, LayerNorm's per-feature weight among
    # them, would see the input's features permuted: moved by a rounding)
    if (not weights or any(n.kind == "input" for n in nodes) or any(n.attrs.get("identity") for n in gemms)
            or not stored_weight(ref, gemms[0])):
        return moved_by_a_rounding()
    model = _copy_of(f, ref)
    path = weights[0]   # the first GEMM's (its part's nodes come first)
    perm = torch.randperm(x.shape[1], generator=torch.Generator(device="cpu").manual_seed(5)).to(x.device)
    owner, _, name = path.rpartition(".")
    w = getattr(model.get_submodule(owner) if owner else model, name)
    dim = 0 if gemms[0].attrs.get("stored_kn") else 1
    with torch.no_grad():
        w.copy_(w.index_select(dim, perm))
    moved_x = x[:, perm].contiguous()
    if not _same_function(ref, model, x, moved_x):
        # The weight is read elsewhere too (a Linear applied twice, a weight tied to another
        # GEMM's): permuted, it computes another function, whose distance from fp64 would be
        # the yardstick.
        del model
        return moved_by_a_rounding()
    return model, moved_x, {path: (perm, dim)}


def _copy_of(f, ref: torch.nn.Module) -> torch.nn.Module:
    """A copy of the eager model, its parameters and buffers equal to ref's."""
    try:
        return copy.deepcopy(ref)
    except RuntimeError:   # (torch.nn.utils.weight_norm's hooks leave tensors deepcopy refuses)
        with torch.device(next(ref.parameters()).device):
            model = f.Model(*f.init_args())
        model.load_state_dict(ref.state_dict())
        model.train(ref.training)
        return model


def _same_function(ref: torch.nn.Module, model: torch.nn.Module, x: torch.Tensor, moved_x: torch.Tensor) -> bool:
    """Whether model on moved_x computes ref on x up to rounding (in eval mode: no running
    statistics move, no Dropout draws)."""
    modes = [(m, m.training) for m in (*ref.modules(), *model.modules())]
    try:
        ref.eval()
        model.eval()
        with torch.no_grad():
            y, y_moved = ref(x), model(moved_x)
    finally:
        for m, training in modes:
            m.training = training
    scale = float(y[torch.isfinite(y)].abs().max()) if bool(torch.isfinite(y).any()) else 0.0
    # (relative to the output's own scale: a softmax's outputs are all below an absolute 1e-3)
    return y.shape == y_moved.shape and torch.allclose(y_moved, y, rtol=1e-3, atol=1e-3 * scale, equal_nan=True)




def _finite_max_abs(d: torch.Tensor) -> float:
    """The largest finite |d| (0 where none is finite)."""
    d = d.abs()
    d = d[torch.isfinite(d)]
    return float(d.max()) if d.numel() else 0.0


def _fits_on_gpu(t: torch.Tensor, device) -> bool:
    """Whether the training check's comparison of how `t` moved fits in the GPU's free memory:
    each model's move (fp64's at 8 bytes an element) and the comparison's fp64 temporaries, some
    ten fp64 copies of `t` in all. Where not, it runs on the host (KernelBench 56's 32768 x 32768
    weight: 8 GB a copy, beside the three models and the fp64 one's gradients on an H100 whose
    80 GB ran out here; docs/perf.md, session 22)."""
    free, _ = torch.cuda.mem_get_info(device)
    return 10 * 8 * t.numel() < free


def _training_run(f, device, tol, batch, rate_scales: dict[str, float]) -> tuple[CheckResult, dict[str, float], bool]:
    """One run of check_training, each parameter's rate times rate_scales' factor for it (1 where
    absent); also the parameters the fp64 run moved too little, each with needed / moved, and
    whether everything compared passed (the outputs and the moves).

    The fp64 run trains; at every step the fp32 runs (ModelNew, eager, a second eager run) start
    from its parameters and buffers rounded to fp32, take one step, and add what the step changed
    to their own sum of moves, judged at the end against the fp64 run's whole move. Left to
    follow trajectories of their own, the runs drift apart step by step, and where a gradient
    grows as the parameters move, the drift grows with it from each run's own rounding, so that
    one eager run's drift was one sample of a spread the file fell outside of by chance (measured
    on an H100, Linear -> sigmoid -> Linear -> logsumexp: at 200 rows the file 29x eager's drift
    at step 12, at 257 rows 16-19x with a second eager run as the yardstick; over another draw,
    the file 2-3x eager's: docs/experiments/s23/train_trajectories.py, docs/perf.md, session 23).
    Started from fp64's point, each step's output and move carries that step's rounding alone."""
    trio = Trio(f, device)
    x = _inputs(f, "rand", batch, device)
    names = [name for name, p in trio.ref.named_parameters() if p.is_floating_point()]
    # The fp64 run's start, kept in host memory (a 32768 x 32768 module, KernelBench 56: 8 GB a
    # weight in fp64, beside three fp32 models and their sums of moves on the GPU).
    start = _floating_state(trio.ref64)
    outputs = Comparison(tol, judge_by_fp64=True)
    g = None
    rates: dict[str, float] = {}
    left_out, kink_note = 0, ""
    kinked = may_kink(f)
    # A module with kinks (ReLU, max pooling): which side of a kink an element's rounding puts it
    # on is a coin toss at every step, for eager as for the file; the masks take out the elements
    # the probe marks at fp64's parameters, but where none works (a kink before a row op, in most
    # rows), a flip changes that run's step (measured on an H100: ReLU then a LayerNorm by hand,
    # the file 1.3e-3 from fp64 at step 7, where eager had not flipped; max pooling by hand, the
    # file 8e-5 at step 17 where eager was 1.8e-6). A second eager run, the same function summed
    # in another order (_second_eager), flips by chance as the file does: every output and move is
    # judged against the larger error of the two eager runs.
    second_eager, moved_x, permuted = _second_eager(f, trio.ref, x)
    models = [*trio.models(), second_eager]   # ModelNew, eager, fp64, eager summing in another order
    fp32_runs = (0, 1, 3)

    def fp64_state():
        return dict(trio.ref64.named_parameters()) | dict(trio.ref64.named_buffers())

    def as_run_holds(k: int, name: str, t64: torch.Tensor) -> torch.Tensor:
        """The fp64 model's tensor `name` rounded to fp32 as run k holds it (the second eager
        run's permuted weight)."""
        t = t64.to(torch.float32)
        if k == 3 and name in permuted:
            perm, dim = permuted[name]
            t = t.index_select(dim, perm)
        return t

    state = [dict(m.named_parameters()) | dict(m.named_buffers()) for m in models]
    moved_sum = {k: {name: torch.zeros_like(t) for name, t in state[k].items() if t.is_floating_point()}
                 for k in fp32_runs}
    first: dict[str, float] = {}
    capped = False
    for step in range(TRAIN_STEPS):
        # Every fp32 run starts the step at the fp64 run's parameters and buffers (in place, as an
        # optimizer writes them: a file that caches what it derives from a weight must notice).
        with torch.no_grad():
            for name, t64 in fp64_state().items():
                for k in fp32_runs:
                    if t64.is_floating_point():
                        state[k][name].copy_(as_run_holds(k, name, t64))
                    else:
                        state[k][name].copy_(t64)
        # The fp64 run's buffers at the step's start (its forward moves them first); its
        # parameters stay there until the fp32 runs have stepped (below).
        buffers_at_start = {name: t.detach().clone() for name, t in trio.ref64.named_buffers() if t.is_floating_point()}
        rng = torch.cuda.get_rng_state(device)
        # Output elements at a kink of the fp64 model at this step's parameters get no weight in
        # this step's loss (kgen/check/kinks.py; as in check_gradients).
        reset = lambda: torch.cuda.set_rng_state(rng, device)   # noqa: E731 - one Dropout mask for every forward
        if g is None:
            g = torch.randn(output_shape(trio.ref64, x.double(), reset), device=device,
                            generator=torch.Generator(device=device).manual_seed(3))
        g_step, note = kink_free_gradient(trio.ref64, x.double(), g, train_step_tol(tol), reset) \
            if kinked else (g, "")
        left_out += int((g_step != g).sum()) if g_step is not g else 0
        kink_note = kink_note or (note if g_step is g else "")
        # The output elements at a jump of the fp64 model at this step's parameters: no better
        # judged here than in Trio.call.
        jumps = jump_mask(trio.ref64, x.double(), reset) if trio.may_jump else None
        ys = {}
        # fp64 first (the rates come from its first gradients); each fp32 run steps right after
        # its own backward, so that its gradients and the fp64 run's are all that is on the GPU.
        for k in (2, *fp32_runs):
            model, dtype = models[k], (torch.float32, torch.float32, torch.float64, torch.float32)[k]
            torch.cuda.set_rng_state(rng, device)   # one Dropout mask for them all
            # (eager, the yardstick, in a TF32 / BF16 / FP16 file's math, as in check_gradients)
            with eager_matmul_math(f.spec.math if k in (1, 3) else "", f.spec.family):
                y = model((moved_x if k == 3 else x).to(dtype))
                params = [model.get_parameter(name) for name in names]
                grads = torch.autograd.grad((y * g_step.to(dtype)).sum(), params, allow_unused=True)
            ys[k] = y.detach()
            del y
            if k == 2:   # the fp64 run's gradients: the rates, and this step's (step_rates)
                sizes = {name: float(d.abs().max()) if d is not None else 0.0 for name, d in zip(names, grads)}
                if not rates:
                    first, largest = sizes, max(sizes.values())
                    for name in names:
                        threshold = train_step_tol(tol) * (1 + float(start[name].abs().max()))
                        rates[name] = (0.0 if sizes[name] <= NO_GRADIENT * largest else
                                       TRAIN_STEP_MARGIN * TRAIN_MOVE_FACTOR * threshold / TRAIN_STEPS / sizes[name]
                                       * rate_scales.get(name, 1.0))
                this_step = step_rates(rates, first, sizes)
                capped = capped or any(this_step[name] < rates[name] for name in names)
                grads64 = grads
                continue
            with torch.no_grad():
                for name, d in zip(names, grads):
                    if d is not None and this_step[name]:
                        model.get_parameter(name).sub_(this_step[name] * d)
                # What the whole step changed, from the values it started at: the update, and
                # whatever the forward and backward wrote (BatchNorm's running statistics; a file
                # that wrote into its own parameters shows here too).
                for name, acc in moved_sum[k].items():
                    at_start = (buffers_at_start[name] if name in buffers_at_start
                                else trio.ref64.get_parameter(name).detach())
                    acc += state[k][name].detach() - as_run_holds(k, name, at_start)
            del grads
        with torch.no_grad():
            for name, d in zip(names, grads64):
                if d is not None and this_step[name]:
                    trio.ref64.get_parameter(name).sub_(this_step[name] * d)
        del grads64
        # eager's error on the elements both are finite on (an overflow of eager's where fp64 is
        # finite is the non-finite pattern's to judge, not a yardstick of infinity)
        eager_error = max(_finite_max_abs(ys[k].double() - ys[2]) for k in (1, 3))
        outputs.add(f"step {step} output", ys[0], ys[1], ys[2], left_out=jumps, yardstick=eager_error)
    # What training changed, parameter by parameter and buffer by buffer: the fp64 run's whole
    # move, and each fp32 run's steps added up.
    cmp = Comparison(tol, relative_to_largest=True, displacements=True)
    for what, a in fp64_state().items():
        if a.is_floating_point():
            on_gpu = _fits_on_gpu(a, device)
            move64 = a.detach() - start[what].to(a.device) if on_gpu else a.detach().cpu() - start[what]
            moves = {k: moved_sum[k][what] if on_gpu else moved_sum[k][what].cpu() for k in fp32_runs}
            if what in permuted:
                perm, dim = permuted[what]
                moves[3] = moves[3].index_select(dim, torch.argsort(perm).to(moves[3].device))
            spread = _finite_max_abs(moves[3].double() - move64)
            cmp.add(f"{what} (its change)", moves[0], moves[1], move64, yardstick=spread)
            del moves, move64
    still = []
    short: dict[str, float] = {}
    for name in names:
        if rates[name]:
            final = trio.ref64.get_parameter(name).detach()
            moved = float((final - start[name].to(final.device)).abs().max())
            needed = TRAIN_MOVE_FACTOR * train_step_tol(tol) * (1 + float(final.abs().max()))
            if not moved >= needed:
                still.append(f"{name} moved {moved:.2e} in the fp64 run, under {needed:.2e}: the check cannot judge it")
                short[name] = needed / moved if moved > 0 else float("inf")
    r = cmp.result(TRAINING_CHECK)
    r.passed = r.passed and outputs.ok and not still
    failures = (outputs.failures if not outputs.ok else []) + still
    if failures:
        r.detail = "; ".join((failures + ([r.detail] if r.detail and not cmp.ok else []))[:3])
    r.max_abs, r.ref_abs = max(r.max_abs, outputs.max_abs), max(r.ref_abs, outputs.ref_abs)
    r.error_ratio = max(r.error_ratio, outputs.ratio)
    if rate_scales:
        r = _with_note(r, "rates of " + ", ".join(f"{name} x{scale:.3g}" for name, scale in rate_scales.items())
                       + " (a first run moved them too little)")
    r = _with_note(r, f"{left_out} loss term(s) at a kink of the reference left out over the steps"
                   if left_out else kink_note)
    if capped:
        r = _with_note(r, f"steps capped at {TRAIN_STEP_CAP:g}x the first's where a gradient grew")
    return r, {name: need for name, need in short.items() if math.isfinite(need)}, cmp.ok and outputs.ok


def check_dropout_refused(f, device) -> CheckResult:
    """In training mode a module with an active Dropout (or another op that draws at random there,
    RReLU, AlphaDropout) raises, naming it and its eval mode, before any work."""
    with torch.device(device):
        new = f.ModelNew(*f.init_args()).train(True)
    try:
        new(torch.rand(4, f.spec.in_features, device=device))
    except RuntimeError as e:
        ok = ("Dropout" in str(e) or "draws at random" in str(e)) and "eval" in str(e)
        return CheckResult("training mode refused (Dropout)", ok, detail="" if ok else f"message: {e}")
    return CheckResult("training mode refused (Dropout)", False,
                       detail="ModelNew ran in training mode: its output cannot match torch's random mask")


def check_errors(f, device, dtype=torch.float32) -> CheckResult:
    """Bad inputs raise errors that name what was expected, as the reference raises at all."""
    with torch.device(device):
        new = f.ModelNew(*f.init_args()).to(dtype).train(f.runs_in_training)
        ref = f.Model(*f.init_args()).to(dtype).train(f.runs_in_training)
    n_in = f.spec.in_features
    other = torch.float32 if dtype != torch.float32 else torch.float64
    cases = {
        "wrong feature size": (torch.rand(4, n_in + 1, device=device, dtype=dtype), ValueError, f"{n_in}"),
        f"{str(other)[6:]} input": (torch.rand(4, n_in, device=device, dtype=other), TypeError, str(dtype)[6:]),
        "CPU input": (torch.rand(4, n_in, dtype=dtype), ValueError, "CUDA"),
    }
    if f.has_batchnorm:   # (one the forward runs: EmittedFile.has_batchnorm)
        cases["batch 1 in training"] = (torch.rand(1, n_in, device=device, dtype=dtype), ValueError,
                                        "Expected more than 1 value")
    failures = []
    for what, (x, kind, phrase) in cases.items():
        raised = None
        try:
            new(x)
        except Exception as e:  # noqa: BLE001
            raised = e
        if not isinstance(raised, kind) or phrase not in str(raised):
            failures.append(f"{what}: expected {kind.__name__} mentioning {phrase!r}, got {raised!r}")
    if f.has_batchnorm:
        # Batch 1 raises what BatchNorm raises, word for word.
        x1 = torch.rand(1, n_in, device=device, dtype=dtype)
        msgs = []
        for m in (ref, new):
            try:
                m(x1)
                msgs.append(None)
            except ValueError as e:
                msgs.append(str(e))
        if msgs[0] != msgs[1]:
            failures.append(f"batch-1 message differs: reference {msgs[0]!r}, new {msgs[1]!r}")
    return CheckResult("clear errors for bad input", not failures, detail="; ".join(failures))


def checks(f: EmittedFile, tol: float, quick: bool, batch: int, device,
           dtype: torch.dtype = torch.float32) -> list[tuple[str, Callable[[], CheckResult]]]:
    """(name, run) of every check, in order; `quick` keeps the core numerical ones. `dtype`: the
    module's (bf16 / fp16: ModelNew and eager both converted, fp64 of the rounded module the
    judge, eager in that dtype the yardstick)."""
    def offset():
        r = _named(f"{mode}, offset {LARGE_OFFSET:g} (vs fp64)",
                   _train_check(f, device, tol, "offset", batch, 2, judge_by_fp64=True, dtype=dtype))
        if tol >= OFFSET_GATES_BELOW_TOL and not r.passed and not r.crashed:
            r.passed = True
            r.detail = f"reported, not gating at tol {tol:g} (reduced-precision GEMMs): {r.detail}"
        return r

    trials = 2 if quick else TRIALS
    # A module with an active Dropout is checked in eval mode (its forward refuses training).
    mode = "train" if f.runs_in_training else "eval"
    core = [
        ("static rules (kgen's and KernelBench's)", lambda: check_static(f)),
        ("seeded construction, state_dict", lambda: check_construction(f, device)),
        (f"{mode}, torch.rand, {trials} calls", _train_check(f, device, tol, "rand", batch, trials, dtype=dtype)),
        ("eval mode", lambda: check_eval(f, device, tol, batch, dtype)),
        (f"{mode}, batch 7", _train_check(f, device, tol, "rand", 7, 1, dtype=dtype)),
        # A Dropout whose mask kgen reproduces runs in training mode in every check (one RNG state
        # for the three models, Trio.call); one it does not must refuse training mode.
        *((("training mode refused (Dropout)", lambda: check_dropout_refused(f, device)),)
          if not f.runs_in_training else ()),
        ("NaN and Inf in input rows", lambda: check_nonfinite_inputs(f, device, tol, batch, dtype)),
        ("NaN in each parameter", lambda: check_nan_parameters(f, device, tol, batch, dtype)),
        (MAGNITUDE_CHECK, lambda: check_magnitudes(f, device, tol, batch, dtype)),
    ]
    if quick:
        return core
    rest = [
        (f"{mode}, torch.randn, 2 calls", _train_check(f, device, tol, "randn", batch, 2, dtype=dtype)),
        (f"{mode}, offset {LARGE_OFFSET:g} (vs fp64)", offset),
        *((f"{mode}, batch {b}", _train_check(f, device, tol, "rand", b, 1, dtype=dtype))
          for b in ODD_BATCHES if b != 7),
        *((("momentum=None, 3 calls", _train_check(f, device, tol, "rand", batch, 3, momentum_none=True,
                                                    dtype=dtype)
            if not functional_batchnorm(f) else
            lambda: CheckResult("momentum=None, 3 calls", True, detail="not run: the reference's F.batch_norm "
                                "takes no momentum=None")),)
          if f.has_batchnorm else ()),
        # KernelBench runs the module in training mode, where Dropout draws a random mask.
        *(((KERNELBENCH_CHECK, lambda: check_kernelbench_eval(f, device, tol, dtype)),) if not f.dropouts else ()),
        ("weights changed in place", lambda: check_weights_change(f, device, tol, batch, dtype)),
        *((("gradients, train mode", lambda: check_gradients(f, device, tol, batch, True, dtype)),)
          if f.runs_in_training else ()),
        *((("gradients, eval mode", lambda: check_gradients(f, device, tol, batch, False, dtype)),)
          if f.has_batchnorm or f.dropouts or not f.runs_in_training else ()),
        *(((TRAINING_CHECK, lambda: check_training(f, device, tol, batch, dtype)),)
          if f.runs_in_training else ()),
        ("non-contiguous / misaligned input", lambda: check_noncontiguous(f, device, tol, batch, dtype)),
        ("clear errors for bad input", lambda: check_errors(f, device, dtype)),
    ]
    return core + rest


def validate(f: EmittedFile, tol: float = 1e-4, quick: bool = False, batch: int | None = None,
             report: Callable[[CheckResult], None] = lambda r: None,
             dtype: torch.dtype = torch.float32, stop_at_failure: bool = False,
             own_heap: bool = False) -> list[CheckResult]:
    """Run the checks on the module in `dtype` (its parameters and input, as module.to(dtype));
    `quick` (used inside a search) runs the core numerical checks only.
    Stops at the first check after which the CUDA context is lost, and with `stop_at_failure`
    at the first that fails (a search asking whether a tier passes at all); the rest come back
    marked not run (and failed). `own_heap`: the caller is a process of kgen's own (`kgen
    validate`, the search's worker), whose whole heap validate() may freeze and thaw (below)."""
    refusal = dtype_refusal(f, dtype)
    if refusal:
        raise ValueError(refusal)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    batch = batch or f.spec.batch
    results: list[CheckResult] = []
    # Each check's garbage is collected after it (below). A full collection scans every object
    # of the process, torch's and sympy's among them: ~0.1 s each, 0.8 s of a search candidate's
    # quick validation. The objects alive now are frozen out of the collector's scans for the
    # checks' duration (what the checks make is still collected) and thawed after: in a process
    # of kgen's own (own_heap) whatever it froze before, else only where nothing is frozen. The
    # GPU host's Python starts with 375 objects frozen (before any import of ours) and is back
    # at 375 after a collection even where they were thawed, so "nothing frozen" never held
    # there and each of a quick validation's ~10 collections scanned all of torch's objects,
    # 0.1-0.14 s each, ~1 s of its 2-3 s (docs/perf.md, sessions 26 and 27). Not in a process
    # that froze objects of its own (a test session): a freeze cannot be undone in part, and what
    # is alive now (this file's module, its cached workspaces) would never be collected.
    gc.collect()
    freeze = own_heap or gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        _run_checks(f, tol, quick, batch, device, dtype, report, stop_at_failure, results)
    finally:
        if freeze:
            gc.unfreeze()
    return results


def _run_checks(f: EmittedFile, tol: float, quick: bool, batch: int, device: torch.device,
                dtype: torch.dtype, report: Callable[[CheckResult], None], stop_at_failure: bool,
                results: list[CheckResult]) -> None:
    context_lost = failed = False
    for name, body in checks(f, tol, quick, batch, device, dtype):
        if context_lost:
            results.append(CheckResult(name, False, detail=NOT_RUN, crashed=True, not_run=True))
            continue
        if failed:
            results.append(CheckResult(name, False, detail=NOT_RUN_AFTER_FAILURE, not_run=True))
            continue
        r = _named(name, body)
        results.append(r)
        report(r)
        context_lost = r.crashed and cuda_context_lost()
        failed = stop_at_failure and not r.passed
        if not context_lost:
            # A check's models (fp64 copies included: 8 GB a weight at 32768 x 32768) are
            # garbage now; hand the memory back so that the next check, or another process on
            # the GPU, can have it.
            gc.collect()
            torch.cuda.empty_cache()


def runs_dtypes(f: EmittedFile) -> list[torch.dtype]:
    """The module dtypes the file's kernels run (its _KGEN_OPERAND_BUILDS; fp32 for a file without)."""
    return list(getattr(f.module, "_KGEN_OPERAND_BUILDS", {torch.float32: None}))


def dtype_refusal(f: EmittedFile, dtype: torch.dtype) -> str | None:
    """Why the file cannot be checked with a module in `dtype` (None: it can)."""
    runs = runs_dtypes(f)
    if dtype in runs:
        return None
    from kgen.codegen.generator import fp32_casts, fp32_only_reason

    why = fp32_only_reason(f.spec) if fp32_casts(f.spec) else \
        "16-bit modules run in the Hopper wgmma files (kgen generate --backend wgmma) and the matrix-vector rewrite's"
    return f"{f.path.name} runs {', '.join(str(d)[6:] for d in runs)} modules, not {str(dtype)[6:]}: {why}"


def worst_error(results: list[CheckResult]) -> tuple[float, float]:
    numeric = [r for r in results if not math.isnan(r.max_abs)]
    return (max((r.max_abs for r in numeric), default=float("nan")),
            max((r.max_rel for r in numeric), default=float("nan")))


def worst_error_ratio(results: list[CheckResult]) -> float:
    """The largest ratio of ModelNew's error to eager fp32's over every check (the fp32-exact
    gate's measure; a search ranks nothing by it but reports it)."""
    return max((r.error_ratio for r in results if not math.isnan(r.error_ratio)), default=float("nan"))


def summary(results: list[CheckResult]) -> str:
    """The closing line: counts, and the checks skipped (after a lost CUDA context, or a failure)
    in one line per reason."""
    skipped = [r for r in results if r.not_run]
    failed = [r for r in results if not r.passed and not r.not_run]
    line = f"{len(results) - len(failed) - len(skipped)} passed, {len(failed)} failed"
    for reason in dict.fromkeys(r.detail for r in skipped):
        names = [r.name for r in skipped if r.detail == reason]
        line += f", {len(names)} {reason} ({', '.join(names)})"
    return line
