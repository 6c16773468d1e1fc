"""Session 47: where an inference forward's host time goes, eager's and emitted files', for one
KernelBench module: in the module's dtype (MODE bf16 / fp16 / fp32: module and input converted, as
KernelBench's eval at that precision) or as an fp32 module inside torch.autocast (MODE autocast).
Per model, under torch.no_grad in eval mode: the host's time to queue one forward (the GPU idle
before it), the synchronized wall time of one forward, then cProfile over CALLS forwards, the
functions by their own time and by cumulative time.

    PYTHONPATH=. python3 docs/experiments/s47/forward_host.py REF.py MODE FILE.py [FILE.py ...]
"""
import contextlib
import cProfile
import io
import pstats
import statistics
import sys
import time

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "autocast": torch.float32}
CALLS = 300


def load(path):
    ns = {"__name__": f"kgen_s47_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def main(ref_path, mode, *paths):
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = DTYPES[mode]
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
    state = eager.state_dict()
    models = {"eager": eager.to(dtype).eval()}
    for path in paths:
        with torch.device("cuda"):
            m = load(path)["ModelNew"](*init)
        m.load_state_dict(state)
        models[path.rsplit("/", 1)[-1]] = m.to(dtype).eval()
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    region = (lambda: torch.autocast("cuda", torch.bfloat16)) if mode == "autocast" else contextlib.nullcontext
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {mode}; x {tuple(x.shape)}")
    with torch.no_grad(), region():
        for name, model in models.items():
            for _ in range(20):
                model(x)
            torch.cuda.synchronize()
            walls, queued = [], []
            for _ in range(200):
                t0 = time.perf_counter()
                model(x)
                queued.append((time.perf_counter() - t0) * 1e6)
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - t0) * 1e6)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(CALLS):
                model(x)
            torch.cuda.synchronize()
            profiler.disable()
            print(f"== {name}: host queues a forward in {statistics.median(queued):.1f} us "
                  f"(p20 {statistics.quantiles(queued, n=5)[0]:.1f}); synchronized wall "
                  f"{statistics.median(walls):.1f} us")
            for order in ("tottime", "cumulative"):
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(28)
                print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:5000])


if __name__ == "__main__":
    main(*sys.argv[1:])
