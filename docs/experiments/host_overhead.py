"""Session 7: where a few-row call's time goes. For each emitted FILE at batch B: kgen bench's
timing (L2 flushed, CUDA events) of ModelNew and eager, three times; host time per call (500
calls back to back, no flush, then one synchronize; the host's time and the whole); and the
GPU time of each kernel (torch.profiler over 20 calls).
Usage: python3 host_overhead.py B FILE..."""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from kgen.check.bench import time_calls
from kgen.check.loading import EmittedFile

batch = int(sys.argv[1])
for path in sys.argv[2:]:
    f = EmittedFile(path)
    with torch.device("cuda"):
        torch.manual_seed(0)
        ref = f.Model(*f.init_args())
        new = f.ModelNew(*f.init_args())
    new.load_state_dict(ref.state_dict())
    (x,) = f.reference.inputs(batch)
    x = x.cuda()
    print(f"== {path} at batch {batch}", flush=True)
    with torch.no_grad():
        for _ in range(3):
            tn, te = time_calls(new, x, iters=100), time_calls(ref, x, iters=100)
            print(f"  bench: ModelNew {tn.median_ms:.4f} ms, eager {te.median_ms:.4f} ms, "
                  f"ratio {tn.median_ms / te.median_ms:.3f}", flush=True)
        for name, m in (("ModelNew", new), ("eager", ref)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(500):
                m(x)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            print(f"  {name}: host {1e6 * (t1 - t0) / 500:.1f} us per call, with the GPU {1e6 * (t2 - t0) / 500:.1f} us")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                new(x)
            torch.cuda.synchronize()
        for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:4]:
            print(f"  kernel {e.key[:70]}: {e.device_time_total / 20:.1f} us per call ({e.count} launches)")
