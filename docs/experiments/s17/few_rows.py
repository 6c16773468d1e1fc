"""Session 17: a module's emitted files at a few rows, against eager fp32, two ways: as kgen
bench times (CUDA events around one call after an L2 flush: the host's time shows where it is
longer than the flush's) and the GPU's own time per call (torch.profiler: the sum of the call's
kernels, and its longest kernel), with each file's error against fp64.

    PYTHONPATH=. python3 docs/experiments/s17/few_rows.py REF.py BATCH FILE.py [FILE.py ...]
"""

import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from kgen.check.bench import time_calls

sys.path.insert(0, "scripts")
from compare_forward import load  # noqa: E402


def gpu_time(fn, x, calls=20):
    """Per call: the sum of the kernels' times, and the longest kernel's name and time (ms)."""
    with torch.no_grad():
        for _ in range(5):
            fn(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(x)
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    total = sum(e.self_device_time_total for e in events) / calls / 1000
    top = max(events, key=lambda e: e.self_device_time_total)
    return total, top.key[:60], top.self_device_time_total / top.count / 1000


def main(ref_path, batch, *files):
    batch = int(batch)
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device(device):
        model = ref["Model"](*init)
        model64 = ref["Model"](*init).double()
    model64.load_state_dict(model.state_dict())
    x = ref["get_inputs"]()[0].to(device)
    x = torch.randn(batch, *x.shape[1:], device=device)
    news = []
    for f in files:
        with torch.device(device):
            new = load(f)["ModelNew"](*init)
        new.load_state_dict(model.state_dict())
        news.append(new)
    with torch.no_grad():
        truth = model64(x.double())
        print(f"{torch.cuda.get_device_name(device)}; {ref_path} at batch {batch}: eager err "
              f"{(model(x).double() - truth).abs().max().item():.2e}")
        errors = [(new(x).double() - truth).abs().max().item() for new in news]
    rounds = {name: [] for name in ["eager", *files]}
    for r in range(5):
        for f, new in (list(zip(files, news)) if r % 2 == 0 else list(zip(files, news))[::-1]):
            rounds["eager"].append(time_calls(model, x, 30).median_ms)
            rounds[f].append(time_calls(new, x, 30).median_ms)
    eager = statistics.median(rounds["eager"])
    total, name, top = gpu_time(model, x)
    print(f"  eager fp32: {eager:.4f} ms as bench times; GPU {total:.4f} ms a call, longest {top:.4f} ({name})")
    for f, new, err in zip(files, news, errors):
        ms = statistics.median(rounds[f])
        total, name, top = gpu_time(new, x)
        print(f"  {ms:.4f} ms ({ms / eager:.3f}x eager) as bench times; GPU {total:.4f} ms a call "
              f"({total / eager:.3f}x eager's bench time), longest {top:.4f} ({name}); err {err:.2e}  {f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
