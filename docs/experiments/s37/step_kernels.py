"""Where one training step's time goes (session 37): eager and emitted files of one KernelBench
module in one dtype, each step (parameter and input gradients reset, forward, backward of an
inner layer) under torch.profiler: per step the wall time with the GPU synchronized after it, the
host's time to queue it, the GPU's busy time (the sum of its kernels' and copies' times) and the
kernels by GPU time; then the CPU-side ops by their own host time.

    PYTHONPATH=. python3 docs/experiments/s37/step_kernels.py REF.py {fp32,bf16,fp16} FILE.py [FILE.py ...]
"""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
STEPS = 20


def load(path):
    ns = {"__name__": f"kgen_s37_{abs(hash(path))}"}
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


def models_of(ref_path, dtype_name, paths):
    """Eager and each emitted file's ModelNew with eager's parameters, in the dtype, on the GPU;
    the input (wanting its gradient: an inner layer) and a fixed output gradient. (Session 39's
    s39/step_host.py and s39/step_ab.py build theirs here too.)"""
    dtype = DTYPES[dtype_name]
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
    state = eager.state_dict()
    models = {"eager": eager.to(dtype)}
    for path in paths:
        with torch.device("cuda"):
            m = load(path)["ModelNew"](*init)
        m.load_state_dict(state)
        models[path.rsplit("/", 1)[-1]] = m.to(dtype)
    torch.manual_seed(1)
    x = ref["get_inputs"]()[0].cuda().to(dtype).requires_grad_()
    g = torch.randn(eager(x).shape, device="cuda").to(dtype)
    return models, x, g


def main(ref_path, dtype_name, *paths):
    torch.backends.cuda.matmul.allow_tf32 = False
    models, x, g = models_of(ref_path, dtype_name, paths)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}")
    for name, model in models.items():
        step = step_of(model, g)
        for _ in range(10):
            step(x)
        torch.cuda.synchronize()
        walls, queued = [], []
        for _ in range(STEPS):
            t0 = time.perf_counter()
            step(x)
            queued.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(STEPS):
                step(x)
            torch.cuda.synchronize()
        events = prof.key_averages()
        gpu_us = sum(e.self_device_time_total for e in events) / STEPS
        print(f"== {name}: wall {statistics.median(walls):.3f} ms a step (synchronized), host queues it in "
              f"{statistics.median(queued):.3f} ms, GPU busy {gpu_us / 1e3:.3f} ms")
        print(events.table(sort_by="self_device_time_total", row_limit=14, max_name_column_width=70))
        print(events.table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=70))


if __name__ == "__main__":
    main(*sys.argv[1:])
