"""One training step of a module in bf16 / fp16 (session 12): emitted files (e.g. of two template
versions) against eager in that dtype, interleaved in one process, with the gradients' errors
against fp64 beside the times.

    PYTHONPATH=. python3 docs/experiments/s12/train16.py REF.py FILE.py [FILE.py ...] [--dtype bf16] [--profile]

The step: parameter and input gradients reset, y = model(x), y.backward(g), x needing its
gradient (an inner layer); kgen.check.bench.time_calls (CUDA events, L2 flushed, median of 30),
7 rounds, the files' order alternating. Errors: max abs of dL/dx and of each parameter's gradient
against fp64 autograd of the same (rounded) module.
"""

import statistics
import sys

import torch

from kgen.check.bench import time_calls

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
PROFILE = False   # --profile: kernels per step instead of the timing
ROUNDS = 7


def load(path):
    ns = {"__name__": f"kgen_train16_{abs(hash(path))}"}
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


def grads(model, x, g):
    x = x.detach().clone().requires_grad_()
    return torch.autograd.grad(model(x), [x] + list(model.parameters()), g.to(x.dtype))


def main(ref_path, *files, dtype="bf16"):
    dt = DTYPES[dtype]
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init).to(dt)
        exact = ref["Model"](*init).double()
        news = [load(f)["ModelNew"](*init).to(dt) for f in files]
    exact.load_state_dict(eager.state_dict())
    for m in news:
        m.load_state_dict(eager.state_dict())
    x = ref["get_inputs"]()[0].cuda().to(dt)
    g = torch.randn(eager(x).shape, device="cuda").to(dt)
    fp64 = grads(exact, x.double(), g.double())
    names = ["x"] + [n for n, _ in eager.named_parameters()]
    print(f"{torch.cuda.get_device_name()}; {ref_path} in {dtype}, input {tuple(x.shape)}")
    for label, model in [("eager", eager)] + list(zip(files, news)):
        errs = [(a.double() - e).abs().max().item() for a, e in zip(grads(model, x, g), fp64)]
        print(f"  gradient errors vs fp64, {label}: " + ", ".join(f"{n} {e:.2e}" for n, e in zip(names, errs)))
    xin = x.detach().clone().requires_grad_()
    if PROFILE:
        # GPU time per kernel of one step (10 steps profiled), eager's and each file's.
        for label, model in [("eager", eager)] + list(zip(files, news)):
            step = step_of(model, g)
            for _ in range(3):
                step(xin)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    step(xin)
                torch.cuda.synchronize()
            rows = sorted(((e.key, e.device_time_total / 10 / 1000) for e in prof.key_averages()), key=lambda r: -r[1])
            print(f"  == {label}: {sum(t for _, t in rows):.3f} ms of kernels per step")
            for name, ms in rows[:14]:
                print(f"     {ms:.3f} ms  {name[:110]}")
        return
    times = {k: [] for k in ["eager", *files]}
    models = list(zip(files, news))
    for r in range(ROUNDS):
        for f, m in (models if r % 2 == 0 else models[::-1]):
            times["eager"].append(time_calls(step_of(eager, g), xin, 30, grad=True).median_ms)
            times[f].append(time_calls(step_of(m, g), xin, 30, grad=True).median_ms)
    e = statistics.median(times["eager"])
    print(f"  one training step: eager {dtype} {e:.3f} ms")
    for f in files:
        ms = statistics.median(times[f])
        print(f"  {ms:.3f} ms  {ms / e:.3f}x eager  {f}  (rounds {min(times[f]):.3f} to {max(times[f]):.3f})")


if __name__ == "__main__":
    args = sys.argv[1:]
    dtype = "bf16"
    if "--profile" in args:
        args.remove("--profile")
        PROFILE = True
    if "--dtype" in args:
        i = args.index("--dtype")
        dtype = args[i + 1]
        del args[i:i + 2]
    main(*args, dtype=dtype)
