"""One training step (forward + backward, an inner layer: dL/dx too) of a KernelBench file whose
row sum the matrix-vector rewrite computes, in fp32 or a 16-bit dtype: eager, the wgmma GEMM's
file and the rewrite's file, interleaved over 5 rounds (kgen.check.bench.time_calls, median of
30 each), with each gradient's max abs error against fp64 autograd of the reference beside them.

    PYTHONPATH=. python3 docs/experiments/s36/gemv_training.py REF.py WGMMA.py GEMV.py {fp32,bf16,fp16}
"""
import statistics
import sys

import torch

from kgen.check.bench import time_calls

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def load(path):
    ns = {"__name__": f"kgen_s36_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def step(model, g):
    params = list(model.parameters())

    def run(x):
        for p in params:
            p.grad = None
        x.grad = None
        model(x).backward(g)
    return run


def grads(model, x, g):
    x = x.detach().clone().requires_grad_()
    y = model(x)
    return torch.autograd.grad(y, [x] + list(model.parameters()), g.to(y.dtype))


def main(ref_path, wgmma_path, gemv_path, dtype_name):
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = DTYPES[dtype_name]
    ref, files = load(ref_path), {"wgmma": load(wgmma_path), "gemv": load(gemv_path)}
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
    state = eager.state_dict()
    models = {"eager": eager.to(dtype)}
    for name, ns in files.items():
        with torch.device("cuda"):
            m = ns["ModelNew"](*init)
        m.load_state_dict(state)
        models[name] = m.to(dtype)
    exact = ref["Model"](*init).cuda().double()
    exact.load_state_dict(state)
    torch.manual_seed(1)
    x = ref["get_inputs"]()[0].cuda()
    g = torch.randn(eager(x.to(dtype)).shape, device="cuda")
    names = ["x"] + [n for n, _ in eager.named_parameters()]
    fp64 = grads(exact, x.double(), g.double())
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}")
    print("gradient max abs error vs fp64 (" + " / ".join(models) + "):")
    errs = {k: [(a.double() - e).abs().max().item() for a, e in zip(grads(m, x.to(dtype), g), fp64)]
            for k, m in models.items()}
    for i, n in enumerate(names):
        print(f"  {n:12s} scale {fp64[i].abs().max().item():.3e}  " + "  ".join(f"{errs[k][i]:.2e}" for k in models))
    xi = x.to(dtype).detach().clone().requires_grad_()
    times = {k: [] for k in models}
    for r in range(5):
        order = list(models.items())
        for k, m in (order if r % 2 == 0 else order[::-1]):
            times[k].append(time_calls(step(m, g.to(dtype)), xi, 30, grad=True).median_ms)
    base = statistics.median(times["eager"])
    for k, t in times.items():
        ms = statistics.median(t)
        print(f"  step {k:6s} {ms:8.3f} ms (rounds {min(t):.3f}-{max(t):.3f})  {ms / base:.3f}x eager {dtype_name}")


if __name__ == "__main__":
    main(*sys.argv[1:])
