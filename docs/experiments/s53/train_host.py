"""Session 53, call G: s47/forward_host.py's measure in KernelBench's eval's mode (training mode,
parameters wanting gradients, no backward called): the host's time to queue one forward, the
synchronized wall time, and cProfile over CALLS forwards by own and cumulative time.

    PYTHONPATH=. python3 docs/experiments/s53/train_host.py REF.py FILE.py [FILE.py ...]
"""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s47"))
from forward_host import CALLS, load  # noqa: E402


def main(ref_path, *paths):
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
    models = {"eager": eager.train()}
    for path in paths:
        with torch.device("cuda"):
            m = load(path)["ModelNew"](*init)
        m.load_state_dict(eager.state_dict())
        models[path.rsplit("/", 1)[-1]] = m.train()
    x = ref["get_inputs"]()[0].cuda()
    print(f"{torch.cuda.get_device_name()}; {ref_path}; fp32 training mode, gradients wanted; x {tuple(x.shape)}")
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
        print(f"== {name}: host queues a forward in {statistics.median(queued):.1f} us; synchronized wall "
              f"{statistics.median(walls):.1f} us")
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(24)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:4500])


if __name__ == "__main__":
    main(*sys.argv[1:])
