"""An emitted file's forward (and eager's) with and without torch.set_default_device("cuda"):
time per call (50 calls, synchronized), one call's host time, which function modes are on, and
where a forward's host time goes under the default device (torch.profiler).

    python3 default_device_ab.py FILE plain|default [bf16|fp32]
"""
import sys
import time

import torch

from kgen.check.loading import EmittedFile

path, mode = sys.argv[1:3]
dtype = torch.bfloat16 if (sys.argv[3] if len(sys.argv) > 3 else "bf16") == "bf16" else torch.float32
f = EmittedFile(path)
if mode == "default":
    torch.set_default_device("cuda")
print(mode, "function modes:", torch._C._is_torch_function_mode_enabled(),
      [type(m).__name__ for m in torch.overrides._get_current_function_mode_stack()])
torch.manual_seed(0)
new = f.ModelNew(*f.init_args()).cuda().to(dtype)
ref = f.Model(*f.init_args()).cuda().to(dtype)
x = torch.randn(f.reference.input.shape[0], f.reference.input.shape[1], device="cuda", dtype=dtype)
print("traced:", f.module._kgen_traced())
for name, m in (("new", new), ("ref", ref)):
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            for _ in range(5):
                m(x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(50):
                m(x)
            torch.cuda.synchronize()
            per = (time.perf_counter() - t) / 50
            hosts = []
            for _ in range(20):
                torch.cuda.synchronize()
                t = time.perf_counter()
                m(x)
                hosts.append(time.perf_counter() - t)
            torch.cuda.synchronize()
        hosts.sort()
        print(f"{mode} {name} grad={grad}: {per * 1e3:.3f} ms a call, host {hosts[10] * 1e6:.0f} us (median of 20)")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(10):
        new(x)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=18, max_name_column_width=60))
import cProfile
import pstats

with torch.no_grad():
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(50):
        new(x)
    torch.cuda.synchronize()
    profile.disable()
pstats.Stats(profile).sort_stats("tottime").print_stats(22)
