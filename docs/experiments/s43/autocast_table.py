"""Session 43: KernelBench's published files inside bf16 autocast, every file in one process:
eager against the file `kgen generate` writes for it, the modules fp32 and in training mode (a
Dropout's module in eval mode), as a mixed-precision training loop runs them. Per file, interleaved
as s42/autocast_ab.py (ROUNDS rounds of CALLS synchronized calls, the order rotating): inference
(no_grad) and a training step (forward + backward of a fixed output gradient, x wanting its
gradient), median wall ms; then the output's max abs error against the fp64 module. A markdown
table on stdout, the medians of the ratios last.

    PYTHONPATH=. python3 docs/experiments/s43/autocast_table.py OUT_DIR REF.py [REF.py ...]

(OUT_DIR holds the emitted files, `kgen generate REF -o OUT_DIR/NAME`, built for bf16 autocast.)
"""
import contextlib
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import load  # noqa: E402

ROUNDS, CALLS = 7, 10


def measure(ref_path, path, queued=False):
    """The medians (ms) of inference and a training step, eager and kgen, and with `queued` (session
    46's table) inference with CALLS calls back to back and one synchronize too ("eager queued",
    "kgen queued": CUDA events, the GPU's time a call where the host keeps ahead)."""
    ref = load(str(ref_path))
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
        new = load(str(path))["ModelNew"](*init)
        exact = ref["Model"](*init).double()
    new.load_state_dict(eager.state_dict())
    exact.load_state_dict(eager.state_dict())
    training = "Dropout" not in Path(ref_path).read_text()
    for m in (eager, new, exact):
        m.train(training)
    torch.manual_seed(1)
    x = ref["get_inputs"]()[0].cuda()
    xg = x.clone().requires_grad_()
    g = torch.randn(eager(x).shape, device="cuda")

    def infer(model):
        def call():
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                model(x)
        return call

    def step(model):
        params = list(model.parameters())

        def call():
            for p in params:
                p.grad = None
            xg.grad = None
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(xg)
            out.backward(g.to(out.dtype))
        return call

    cases = {"eager": infer(eager), "kgen": infer(new), "eager step": step(eager), "kgen step": step(new)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in cases.values():
            for _ in range(3):
                fn()
    walls = {n: [] for n in (*cases, *(("eager queued", "kgen queued") if queued else ()))}
    names = list(cases)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(ROUNDS):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn = cases[n]
            fn()
            torch.cuda.synchronize()
            for _ in range(CALLS):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                walls[n].append((time.perf_counter() - t0) * 1e3)
            if queued and n in ("eager", "kgen"):
                start.record()
                for _ in range(CALLS):
                    fn()
                end.record()
                torch.cuda.synchronize()
                walls[f"{n} queued"].append(start.elapsed_time(end) / CALLS)
    ms = {n: statistics.median(w) for n, w in walls.items()}
    out64 = exact(x.double())
    errors = []
    for model in (eager, new):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        errors.append((out.double() - out64).abs().max().item())
    return ms, errors, out.dtype, training


def main(out_dir, *refs):
    print(f"{torch.cuda.get_device_name()}; bf16 autocast; {ROUNDS} rounds of {CALLS} calls, interleaved")
    print("| file | mode | eager ms | kgen ms | kgen / eager | step: eager ms | kgen ms | kgen / eager | output | error vs fp64: eager / kgen |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios, step_ratios = [], []
    for ref in refs:
        ref = Path(ref)
        try:
            ms, errors, dtype, training = measure(ref, Path(out_dir) / ref.name)
        except Exception as e:   # (a file that fails is a row that says so, not a lost table)
            print(f"| {ref.name} | failed: {type(e).__name__}: {str(e)[:200]} |")
            continue
        ratios.append(ms["kgen"] / ms["eager"])
        step_ratios.append(ms["kgen step"] / ms["eager step"])
        print(f"| {ref.name} | {'train' if training else 'eval'} | {ms['eager']:.3f} | {ms['kgen']:.3f} | {ratios[-1]:.3f} | "
              f"{ms['eager step']:.3f} | {ms['kgen step']:.3f} | {step_ratios[-1]:.3f} | {str(dtype)[6:]} | "
              f"{errors[0]:.2e} / {errors[1]:.2e} |", flush=True)
        torch.cuda.empty_cache()
    print(f"{len(ratios)} of {len(refs)} files; median kgen / eager autocast: inference {statistics.median(ratios):.3f}, "
          f"training step {statistics.median(step_ratios):.3f}; below 1.0x: {sum(r < 1 for r in ratios)} and "
          f"{sum(r < 1 for r in step_ratios)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
