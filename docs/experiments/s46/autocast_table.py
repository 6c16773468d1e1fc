"""Session 46: s43/autocast_table.py's table (KernelBench's files inside bf16 autocast, the module
fp32 in training mode, eager against `kgen generate`'s file, interleaved in one process) with a
column more: inference queued, CALLS calls back to back and one synchronize (the GPU's time a call
where the host keeps ahead, as a serving loop runs), beside s43's synchronized calls (the host's
time to launch a call counts too). Since session 46 an fp32 module's inference there leaves its
weight fp32 for kgen's round16 GEMM (no conversion of it), and its training step converts it once,
as before.
    PYTHONPATH=. python3 docs/experiments/s46/autocast_table.py OUT_DIR REF.py [REF.py ...]"""
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import load  # noqa: E402

ROUNDS, CALLS = 7, 10


def measure(ref_path, path):
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
    walls = {n: [] for n in (*cases, "eager queued", "kgen queued")}
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
            if n in ("eager", "kgen"):
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
    print("| file | rows | inference: eager ms | kgen ms | kgen / eager | queued: eager ms | kgen ms | kgen / eager "
          "| step: eager ms | kgen ms | kgen / eager | error vs fp64: eager / kgen |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cols = {"sync": [], "queued": [], "step": []}
    for ref in refs:
        ref = Path(ref)
        try:
            ms, errors, dtype, training = measure(ref, Path(out_dir) / ref.name)
        except Exception as e:   # (a file that fails is a row that says so, not a lost table)
            print(f"| {ref.name} | failed: {type(e).__name__}: {str(e)[:200]} |")
            continue
        r = {"sync": ms["kgen"] / ms["eager"], "queued": ms["kgen queued"] / ms["eager queued"],
             "step": ms["kgen step"] / ms["eager step"]}
        for k, v in r.items():
            cols[k].append(v)
        rows = load(str(ref))["get_inputs"]()[0].shape[0]
        print(f"| {ref.name} | {rows} | {ms['eager']:.3f} | {ms['kgen']:.3f} | {r['sync']:.3f} | {ms['eager queued']:.3f} | "
              f"{ms['kgen queued']:.3f} | {r['queued']:.3f} | {ms['eager step']:.3f} | {ms['kgen step']:.3f} | "
              f"{r['step']:.3f} | {errors[0]:.2e} / {errors[1]:.2e} |", flush=True)
        torch.cuda.empty_cache()
    print(f"{len(cols['sync'])} of {len(refs)} files; median kgen / eager autocast: inference {statistics.median(cols['sync']):.3f} "
          f"(queued {statistics.median(cols['queued']):.3f}), training step {statistics.median(cols['step']):.3f}; below 1.0x: "
          f"{sum(v < 1 for v in cols['sync'])}, {sum(v < 1 for v in cols['queued'])} and {sum(v < 1 for v in cols['step'])}")


if __name__ == "__main__":
    main(*sys.argv[1:])
