"""Benchmarking against the eager reference in the same process (docs/design.md, "Measurement").

CUDA events around each call, the L2 flushed (a 256 MB write) before each timed call, warm-up
first (WARMUP_CALLS calls and at least WARMUP_SECONDS of them), median with p20/p80. The timed
calls are queued back to back under torch.no_grad (time_calls), so the numbers are the GPU's
work; KernelBench's eval synchronizes after each call with gradients on, which adds the host's
work before a call's first kernel where it outlasts the L2 flush (docs/perf.md, session 47). Absolute times drift between machines and runs; the ratio to the
eager reference measured side by side is the number that holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import statistics
import time

import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import Trio, extra_input_gradients, may_kink
from kgen.tune.configs import gate_tolerance, precision_name

FLUSH_BYTES = 256 * 1024 * 1024
# Warm-up before the timed calls: at least this many calls, and calls for at least this long. A
# GPU left idle (a build of several seconds before the first timing in a worker) runs the first
# calls slower; a few calls of 0.1 ms are not enough to bring it back (measured on an H100: the
# first of three timings in a fresh process 0.411 ms, the next two 0.113, KernelBench 12 at 7
# rows). The time is the fix's guess at the cause, not measured.
WARMUP_CALLS = 5
WARMUP_SECONDS = 0.1


@dataclasses.dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float

    def __str__(self):
        return f"{self.median_ms:8.3f} ms  (p20 {self.p20_ms:.3f}, p80 {self.p80_ms:.3f})"


def time_calls(fn, x, iters: int = 50, warmup: int = WARMUP_CALLS, grad: bool = False) -> Timing:
    """fn(x) timed as the module docstring says; under torch.no_grad() unless `grad` (a training
    step's fn, which runs backward itself)."""
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=x.device)
    with contextlib.nullcontext() if grad else torch.no_grad():
        start, calls = time.perf_counter(), 0
        while calls < warmup or time.perf_counter() - start < WARMUP_SECONDS:
            fn(x)
            calls += 1
            if calls % 16 == 0:
                torch.cuda.synchronize()   # the GPU's time, not the queue's
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            flush.fill_(float(i))
            starts[i].record()
            fn(x)
            ends[i].record()
        torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    q = statistics.quantiles(times, n=10, method="inclusive")
    return Timing(statistics.median(times), q[1], q[7])


@dataclasses.dataclass
class BenchResult:
    device: str
    batch: int
    new: Timing
    eager_fp32: Timing
    eager_tf32: Timing
    max_abs_err: float
    max_rel_err: float
    compiled: Timing | None = None   # torch.compile(reference), default mode, in `dtype`
    mode: str = "training"           # "eval" for a module with Dropout (it refuses training)
    # The module's dtype: ModelNew and eager (eager_fp32 then means eager in this dtype; TF32
    # does not apply to 16-bit GEMMs) ran in it; errors are against an fp64 copy.
    dtype: str = "float32"
    eager_abs_err: float = float("nan")   # eager's own max abs error vs fp64 (the yardstick)
    autotuned: Timing | None = None  # torch.compile(reference, mode="max-autotune"), in `dtype`

    @property
    def ratio(self) -> float:
        """Time of ModelNew over the time of eager fp32 (lower is better)."""
        return self.new.median_ms / self.eager_fp32.median_ms

    @property
    def ratio_tf32(self) -> float:
        return self.new.median_ms / self.eager_tf32.median_ms

    def measured(self, tol: float) -> dict:
        """The record an emitted file's header carries."""
        return {
            "device": self.device,
            "date": datetime.date.today().isoformat(),
            "batch": self.batch,
            "tol": tol,
            "median_ms": round(self.new.median_ms, 4),
            "p20_ms": round(self.new.p20_ms, 4),
            "p80_ms": round(self.new.p80_ms, 4),
            "eager_ms": round(self.eager_fp32.median_ms, 4),
            "eager_tf32_ms": round(self.eager_tf32.median_ms, 4),
            "ratio": round(self.ratio, 4),
            "max_abs_err": float(f"{self.max_abs_err:.3e}"),
            "max_rel_err": float(f"{self.max_rel_err:.3e}"),
            **({} if self.dtype == "float32" else {"dtype": self.dtype}),
        }

    def report(self) -> str:
        half = self.dtype != "float32"
        name = precision_name(self.dtype)
        return "\n".join([
            f"device: {self.device}, batch {self.batch}, {self.mode} mode, {self.dtype} module, "
            "L2 flushed before each call, calls queued under no_grad (the GPU's time: KernelBench's "
            "eval synchronizes after each call, with gradients on, so its time also holds the host's "
            "work before the first kernel)",
            f"ModelNew            {self.new}",
            f"{'eager ' + name:<20}{self.eager_fp32}   ModelNew takes {self.ratio:.3f}x its time "
            f"({1 / self.ratio:.2f}x speedup)",
            *([] if half else [f"eager TF32 allowed  {self.eager_tf32}   ModelNew takes {self.ratio_tf32:.3f}x its time"]),
            *([f"{'torch.compile ' + name:<20}{self.compiled}   ModelNew takes "
               f"{self.new.median_ms / self.compiled.median_ms:.3f}x its time"] if self.compiled else []),
            *([f"{'max-autotune ' + name:<20}{self.autotuned}   ModelNew takes "
               f"{self.new.median_ms / self.autotuned.median_ms:.3f}x its time"] if self.autotuned else []),
            f"ModelNew error vs fp64: max abs {self.max_abs_err:.2e}, max rel {self.max_rel_err:.2e}"
            + (f" (eager {name}: {self.eager_abs_err:.2e})" if not math.isnan(self.eager_abs_err) else ""),
        ])


def bench(f: EmittedFile, batch: int | None = None, iters: int = 50, seed: int = 0,
          with_compile: bool = False, dtype: torch.dtype = torch.float32,
          with_autotune: bool = False) -> BenchResult:
    """ModelNew against eager (and torch.compile) with the module and its input in `dtype`."""
    device = torch.device("cuda")
    batch = batch or f.spec.batch
    # ModelNew, eager and fp64 as the checks build them (eval mode for a module with a Dropout
    # kgen does not reproduce: loading.EmittedFile)
    trio = Trio(f, device, seed, dtype=dtype)
    ref, new, ref64 = trio.ref, trio.new, trio.ref64
    # The reference's own get_inputs(), in the module's dtype (as KernelBench's eval casts them).
    x = f.reference.inputs(batch)[0].to(device, dtype)   # (the tensors after it: Reference.given_extra_inputs)

    # Error first, on fresh modules, so the number refers to the same state as a user's first
    # call; each forward from one RNG state (a Dropout in training mode: one mask for the three).
    rng = torch.cuda.get_rng_state(device)
    with torch.no_grad():
        out = new(x).double()
        torch.cuda.set_rng_state(rng, device)
        expect = ref64(x.double())
        torch.cuda.set_rng_state(rng, device)
        eager_err = (ref(x).double() - expect).abs().max().item()
    abs_err = (out - expect).abs().max().item()
    scale = expect.abs().max().item()
    rel_err = abs_err / scale if scale > 0 else abs_err  # an all-zero output (ReLU of negatives)

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    x = f.reference.timed_input(x)
    new_t = time_calls(new, x, iters)
    eager = time_calls(ref, x, iters)
    compiled = time_calls(torch.compile(ref), x, iters) if with_compile else None
    autotuned = time_calls(torch.compile(ref, mode="max-autotune"), x, iters) if with_autotune else None
    torch.backends.cuda.matmul.allow_tf32 = True
    eager_tf32 = time_calls(ref, x, iters) if dtype == torch.float32 else eager
    torch.backends.cuda.matmul.allow_tf32 = previous
    return BenchResult(torch.cuda.get_device_name(device), batch, new_t, eager, eager_tf32,
                       abs_err, rel_err, compiled, "training" if f.runs_in_training else "eval",
                       str(dtype).removeprefix("torch."), eager_err, autotuned)


def runoff(files: list[EmittedFile], rounds: int = 5, iters: int = 30, seed: int = 0,
           dtype: torch.dtype = torch.float32) -> dict:
    """Close candidates timed against each other: in each of `rounds` rounds every file runs
    right after an eager run (a tensor-core file timed right after another one measured up to
    8 % slower than after eager: the clocks depend on what ran before, docs/perf.md), in an
    order that alternates between rounds; the modules and the input in `dtype`. Returns
    {"eager": [ms per timing], path: [ms per round]} (medians of `iters` calls each)."""
    device = torch.device("cuda")
    f0 = files[0]
    torch.manual_seed(seed)
    with torch.device(device):
        ref = f0.Model(*f0.init_args())
        news = [f.ModelNew(*f.init_args()) for f in files]
    for new in news:
        new.load_state_dict(ref.state_dict())
    for m in (ref, *news):
        m.to(dtype).train(f0.runs_in_training)
    x = f0.reference.inputs(f0.spec.batch)[0].to(device, dtype)   # (the tensors after it: given_extra_inputs)
    x = f0.reference.timed_input(x)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    times: dict = {"eager": [], **{str(f.path): [] for f in files}}
    pairs = list(zip(files, news))
    for r in range(rounds):
        for f, new in (pairs if r % 2 == 0 else pairs[::-1]):
            times["eager"].append(time_calls(ref, x, iters).median_ms)
            times[str(f.path)].append(time_calls(new, x, iters).median_ms)
    torch.backends.cuda.matmul.allow_tf32 = previous
    return times



def training_step(model, g, extras=()):
    """One training step of `model` as a function of x (which requires its gradient: an inner
    layer, so the step computes dL/dx too): the gradients left by the last step dropped (as an
    optimizer's zero_grad(set_to_none=True)), forward, backward of the output gradient g. `extras`:
    get_inputs()' tensors after x, passed after it; those that require their gradient get it in
    each step, as x does (a residual from the layer before)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def step(x):
        for t in (*params, *extras):
            t.grad = None
        x.grad = None
        model(x, *extras).backward(g)

    return step


@dataclasses.dataclass
class TrainingResult:
    """One training step of ModelNew against eager in the module's dtype (docs/design.md,
    "Measurement"), and each gradient's max abs error against fp64 autograd of the same module's
    values, ModelNew's and eager's."""
    device: str
    batch: int
    dtype: str
    mode: str
    new: Timing               # median over the rounds of each round's median
    eager: Timing
    new_rounds: list          # each round's median, ms
    eager_rounds: list
    compiled: dict            # {"default" / "max-autotune": Timing}: torch.compile of the reference, where asked
    errors: list              # (name, fp64's max abs, ModelNew's max abs error, eager's)
    new_peak_mib: float       # the GPU memory one step allocates at its peak above what is held between steps
    eager_peak_mib: float
    note: str = ""            # output elements at a kink of the reference left out of the errors' g

    @property
    def ratio(self) -> float:
        return self.new.median_ms / self.eager.median_ms

    def report(self) -> str:
        name = precision_name(self.dtype)
        width = max(len(n) for n, *_ in self.errors)
        spread = (lambda t: f"rounds {min(t):.3f}-{max(t):.3f}")
        return "\n".join([
            f"device: {self.device}, batch {self.batch}, {self.mode} mode, {self.dtype} module; one "
            "training step: forward, then backward with dL/dx (an inner layer) and every other "
            "input's gradient, gradients reset before each; L2 flushed before each step",
            f"ModelNew            {self.new.median_ms:8.3f} ms  ({spread(self.new_rounds)})",
            f"{'eager ' + name:<20}{self.eager.median_ms:8.3f} ms  ({spread(self.eager_rounds)})   "
            f"ModelNew takes {self.ratio:.3f}x its time ({1 / self.ratio:.2f}x speedup)",
            *(f"{('torch.compile ' if mode == 'default' else mode + ' ') + name:<20}{t.median_ms:8.3f} ms   "
              f"ModelNew takes {self.new.median_ms / t.median_ms:.3f}x its time" for mode, t in self.compiled.items()),
            f"peak GPU memory of a step, above what is held between steps: ModelNew {self.new_peak_mib:.1f} MiB, "
            f"eager {name} {self.eager_peak_mib:.1f} MiB",
            f"gradients, max abs error vs fp64 (ModelNew / eager {name}; the gradient's largest magnitude)"
            + (f"; {self.note}" if self.note else "") + ":",
            *(f"  {n:<{width}}  {new:.2e} / {eager:.2e}  ({scale:.2e})" for n, scale, new, eager in self.errors),
        ])


def _max_error(a: torch.Tensor, expect: torch.Tensor) -> float:
    return (a.double() - expect).abs().max().item() if a.numel() else 0.0


def _step_peak_mib(step, x, device) -> float:
    """The GPU memory one call of step(x) allocates at its peak above what was allocated before it
    (the last step's gradients, which the step drops and makes again, included in both), MiB."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step(x)
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


class NoTrainingStep(ValueError):
    """A file with no training step to time: no backward, or an output that carries no gradient."""


def refuse_training(f: EmittedFile) -> None:
    """Raises NoTrainingStep where the file has no backward (before anything is built or run)."""
    from kgen.check.validate import has_backward

    if not has_backward(f):
        raise NoTrainingStep(f"{f.path.name} has no backward kernels (its backward() raises): "
                             "there is no training step to time")


def bench_training(f: EmittedFile, batch: int | None = None, iters: int = 30, rounds: int = 5,
                   seed: int = 0, dtype: torch.dtype = torch.float32,
                   with_compile: bool = False, with_autotune: bool = False) -> TrainingResult:
    """One training step of ModelNew and of eager, the module and its input in `dtype`: each
    round times both (`iters` steps each, time_calls), in an order that alternates between
    rounds so that neither always runs first. The gradients' errors first, on the fresh modules,
    as kgen validate's gradient check takes them: every forward from one CUDA RNG state (a
    Dropout draws one mask), the output gradient in the module's dtype, output elements at a
    kink of the reference left out of it (kinks.kink_free_gradient), a parameter with no
    gradient at these inputs counted as zeros. Raises ValueError where there is no step to time:
    a file without a backward, an output that carries no gradient (NoTrainingStep)."""
    from kgen.check.kinks import _BuffersKept, gradients, kink_free_gradient, output_shape

    refuse_training(f)
    device = torch.device("cuda")
    batch = batch or f.spec.batch
    trio = Trio(f, device, seed, dtype=dtype)
    ref, new, ref64 = trio.ref, trio.new, trio.ref64
    x = f.reference.inputs(batch)[0].to(device, dtype)   # (the tensors after it: Reference.given_extra_inputs)
    name = precision_name(dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        rng = torch.cuda.get_rng_state(device)
        reset = lambda: torch.cuda.set_rng_state(rng, device)   # noqa: E731 - one Dropout mask for every forward
        with torch.enable_grad(), _BuffersKept(ref64):
            reset()
            if not ref64(x.double().requires_grad_()).requires_grad:
                raise NoTrainingStep(f"{f.reference.path.name}'s output carries no gradient (its forward "
                                     "detaches it): there is no training step to time")
        shape = output_shape(ref64, x.double(), reset)
        g = torch.randn(shape, device=device, generator=torch.Generator(device).manual_seed(seed + 1)).to(dtype)
        # (the kinks at the gate's tolerance: the dtype's, 1e-2 for an fp32 module of a TF32, BF16
        # or FP16 file)
        tol = gate_tolerance(name, getattr(f.spec, "math", ""))
        judged, note = (kink_free_gradient(ref64, x.double(), g.double(), tol, reset)
                        if may_kink(f) else (g, ""))
        names = ["input"] + [n for n, _ in ref.named_parameters()]
        # (BatchNorm's running buffers move on each training forward: each model's kept as it was)
        with _BuffersKept(ref64), _BuffersKept(new), _BuffersKept(ref):
            expect = gradients(ref64, x.double(), judged.double(), reset)
            new_grads = gradients(new, x, judged.to(dtype), reset)
            eager_grads = gradients(ref, x, judged.to(dtype), reset)
        if f.reference.extra_inputs:
            # get_inputs()' tensors after the input (a residual, a gate): their gradients too, as
            # validate's gradient check takes them (zeros where none flows)
            # (from the RNG state of the forwards above: one Dropout mask)
            names += f.spec.graph().extra_input_names
            expect = [*expect, *extra_input_gradients(f, ref64, x.double(), judged.double(), rng, dtype)]
            new_grads = [*new_grads, *extra_input_gradients(f, new, x, judged.to(dtype), rng)]
            eager_grads = [*eager_grads, *extra_input_gradients(f, ref, x, judged.to(dtype), rng)]
        errors = [(n, e.abs().max().item() if e.numel() else 0.0, _max_error(a, e), _max_error(b, e))
                  for n, e, a, b in zip(names, expect, new_grads, eager_grads)]
        del expect, new_grads, eager_grads
        xi = f.reference.timed_input(x.detach()).clone().requires_grad_()
        # (the inputs after x as leaves that want their gradient: each step computes theirs too)
        extras = [e.detach().clone().requires_grad_(e.is_floating_point()) for e in f.reference.extra_inputs_for(x)]
        steps = {"new": training_step(new, g, extras), "eager": training_step(ref, g, extras)}
        times = {"new": [], "eager": []}
        for r in range(rounds):
            for k in (("new", "eager") if r % 2 == 0 else ("eager", "new")):
                times[k].append(time_calls(steps[k], xi, iters, grad=True))
        peaks = {k: _step_peak_mib(steps[k], xi, device) for k in ("new", "eager")}
        modes = ["default"] * with_compile + ["max-autotune"] * with_autotune
        compiled = {mode: time_calls(training_step(torch.compile(ref, mode=mode), g, extras), xi, iters * rounds, grad=True)
                    for mode in modes}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous

    def over_rounds(ts):
        return Timing(statistics.median(t.median_ms for t in ts), statistics.median(t.p20_ms for t in ts),
                      statistics.median(t.p80_ms for t in ts))

    return TrainingResult(torch.cuda.get_device_name(device), batch, str(dtype).removeprefix("torch."),
                          "training" if f.runs_in_training else "eval",
                          over_rounds(times["new"]), over_rounds(times["eager"]),
                          [t.median_ms for t in times["new"]], [t.median_ms for t in times["eager"]],
                          compiled, errors, peaks["new"], peaks["eager"], note)
