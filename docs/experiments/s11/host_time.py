"""Host time of emitted files' forwards (session 11): what a call costs the CPU before it returns,
the GPU idle (synchronized before each call), and KernelBench's way of timing (CUDA events
around one call, synchronized after each: host and GPU time together when the host is the
longer); then a cProfile of the calls, by own time. Files of one module from two template
versions, interleaved.

    PYTHONPATH=. python3 docs/experiments/s11/host_time.py REF.py --dtype bf16 FILE.py [FILE.py ...]
"""

import argparse
import cProfile
import io
import pstats
import statistics
import time

import torch


def load(path):
    ns = {"__name__": f"kgen_host_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    ref = load(a.ref)
    (x,) = [t.cuda().to(dtype) for t in ref["get_inputs"]()]
    models = {"eager": ref["Model"](*ref["get_init_inputs"]()).cuda().to(dtype)}
    for f in a.files:
        ns = load(f)
        models[f] = ns["ModelNew"](*ns["get_init_inputs"]()).cuda().to(dtype)
    host = {k: [] for k in models}
    kb = {k: [] for k in models}
    with torch.no_grad():
        for m in models.values():
            for _ in range(5):
                m(x)
        torch.cuda.synchronize()
        for _ in range(a.calls):
            for k, m in models.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                m(x)
                host[k].append(time.perf_counter() - t0)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                m(x)
                end.record()
                torch.cuda.synchronize()
                kb[k].append(start.elapsed_time(end))
        print(f"{torch.cuda.get_device_name()}; {a.ref} in {a.dtype}, {a.calls} calls each, medians")
        for k in models:
            print(f"  host {1e3 * statistics.median(host[k]):7.3f} ms   KernelBench-style {statistics.median(kb[k]):7.3f} ms   {k}")
        for k, m in models.items():
            if k == "eager":
                continue
            prof = cProfile.Profile()
            for _ in range(50):
                torch.cuda.synchronize()
                prof.enable()
                m(x)
                prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
            print(f"== cProfile, 50 calls: {k}")
            print("\n".join(line for line in s.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
