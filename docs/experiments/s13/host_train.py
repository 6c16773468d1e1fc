"""Host time of one training step (session 13): what a step (forward, backward, x needing its
gradient) costs the CPU before it returns, the GPU idle (synchronized before each step), against
the GPU time of the same step (CUDA events, synchronized, the host's launches ahead: the step
twice, the second timed); then a cProfile of the steps by own time and by cumulative time.
Eager and emitted files of one module, interleaved.

    PYTHONPATH=. python3 docs/experiments/s13/host_train.py REF.py --dtype bf16 FILE.py [FILE.py ...]
"""

import argparse
import cProfile
import io
import pstats
import statistics
import time

import torch


def load(path):
    ns = {"__name__": f"kgen_host_train_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def step_of(model, g):
    params = list(model.parameters())

    def step(x):
        for p in params:
            p.grad = None
        x.grad = None
        model(x).backward(g)

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--profile", type=int, default=40, help="steps under cProfile per model")
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    ref = load(a.ref)
    torch.manual_seed(0)
    x = ref["get_inputs"]()[0].cuda().to(dtype).requires_grad_()
    models = {"eager": ref["Model"](*ref["get_init_inputs"]()).cuda().to(dtype)}
    for f in a.files:
        ns = load(f)
        models[f] = ns["ModelNew"](*ns["get_init_inputs"]()).cuda().to(dtype)
        models[f].load_state_dict(models["eager"].state_dict())
    g = torch.randn(models["eager"](x).shape, device="cuda").to(dtype)
    steps = {k: step_of(m, g) for k, m in models.items()}
    host = {k: [] for k in models}
    gpu = {k: [] for k in models}
    for s in steps.values():
        for _ in range(5):
            s(x)
    torch.cuda.synchronize()
    for _ in range(a.steps):
        for k, s in steps.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            s(x)
            host[k].append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
            # The GPU's time: a long kernel first, so that the step's launches are all queued
            # before the GPU reaches the timed step.
            torch.cuda._sleep(5_000_000)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            s(x)
            end.record()
            torch.cuda.synchronize()
            gpu[k].append(start.elapsed_time(end))
    print(f"{torch.cuda.get_device_name()}; {a.ref} in {a.dtype}, one training step, {a.steps} steps each, medians")
    for k in models:
        print(f"  host {statistics.median(host[k]):.3f} ms  GPU {statistics.median(gpu[k]):.3f} ms  {k}")
    for k, s in steps.items():
        if k == "eager":
            continue
        prof = cProfile.Profile()
        torch.cuda.synchronize()
        prof.enable()
        for _ in range(a.profile):
            s(x)
        prof.disable()
        torch.cuda.synchronize()
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(order).print_stats(28)
            print(f"== cProfile of {a.profile} steps, by {order}: {k}")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
