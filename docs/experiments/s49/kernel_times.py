"""Session 49: the CUDA kernels one training-mode forward (gradients wanted: z kept) of each emitted
file runs, with their device time by torch's profiler (CUPTI), averaged over ITERS forwards queued
back to back; the files interleaved over ROUNDS rounds (one process), their order turned each round.

    PYTHONPATH=. python3 docs/experiments/s49/kernel_times.py REF.py {bf16,fp16,fp32} FILE.py [FILE.py ...]
"""
import collections
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s47"))
from kb_timing_ab import DTYPES, load_models  # noqa: E402

ROUNDS, ITERS = 3, 20


def short(name):
    for key in ("KeepingZ", "StoreEpilogue", "pointwise_kernel", "split_kernel", "to_16bit", "memset", "Memset"):
        if key in name:
            kernel = name.split("<")[0].split("(")[0].split("::")[-1].replace("void ", "")
            return f"{kernel} [{key}]"
    return name[:70]


def profile(model, x):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            model(x)
        torch.cuda.synchronize()
    per = collections.defaultdict(float)
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    for e in events:
        per[short(e.name)] += e.time_range.elapsed_us() / ITERS
    return per


def main(ref_path, dtype_name, *paths, prepare=None, counted=lambda kernel: True, note=""):
    """`prepare(model, x)` after each model's first forward (session 50's changed_w.py: a forward
    pre-hook); `counted(kernel)`: whether a kernel's time is counted."""
    dtype = DTYPES[dtype_name]
    ref, _, _, _, models = load_models(ref_path, dtype, paths)
    for m in models.values():
        m.train()
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    if prepare is not None:
        for m in models.values():
            m(x)
            prepare(m, x)
    runs = {p: collections.defaultdict(list) for p in paths}
    for round_ in range(ROUNDS):   # (the files' order turns each round: s47/kb_timing_ab.py says why)
        for p in paths[round_ % len(paths):] + paths[:round_ % len(paths)]:
            m = models[p]
            for _ in range(3):
                m(x)
            for k, v in profile(m, x).items():
                if counted(k):
                    runs[p][k].append(v)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}; train mode, gradients wanted; "
          f"{note}{ROUNDS} rounds x {ITERS} forwards, median of the rounds' means")
    print("| file | kernel | device us per forward |")
    print("|---|---|---|")
    for p in paths:
        total = 0.0
        for k, vs in sorted(runs[p].items()):
            med = statistics.median(vs)
            total += med
            print(f"| {p.rsplit('/', 2)[-2]}/{p.rsplit('/', 1)[-1]} | {k} | {med:.1f} |")
        print(f"| {p.rsplit('/', 2)[-2]}/{p.rsplit('/', 1)[-1]} | **all kernels** | **{total:.1f}** |")


if __name__ == "__main__":
    main(*sys.argv[1:])
