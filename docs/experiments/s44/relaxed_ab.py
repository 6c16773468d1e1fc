"""An fp32 module's 1e-2 tier, interleaved in one process: eager fp32 (TF32 off), eager TF32
(allow_tf32), eager inside bf16 autocast, and emitted files (e.g. kgen's wgmma bf16 and tf32 GEMMs,
cuBLAS TF32), each file's output error against fp64 beside its time.

    PYTHONPATH=. python3 docs/experiments/s44/relaxed_ab.py REF.py FILE.py [FILE.py ...]

Eager's cases and each file run in alternating order each round, medians over ROUNDS rounds of
30 calls (kgen.check.bench.time_calls: L2 flushed before each call). Training mode, no grad.
"""

import statistics
import sys

import torch

from kgen.check.bench import time_calls

ROUNDS = 7


def load(path):
    ns = {"__name__": f"kgen_relaxed_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def main(ref_path, *files):
    dev = torch.device("cuda")
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device(dev):
        model = ref["Model"](*init)
        model64 = ref["Model"](*init).double()
        news = [load(f)["ModelNew"](*init) for f in files]
    model64.load_state_dict(model.state_dict())
    for new in news:
        new.load_state_dict(model.state_dict())
    x = ref["get_inputs"]()[0].to(dev)

    def tf32(on):
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on

    def eager_fp32(v):
        tf32(False)
        return model(v)

    def eager_tf32(v):
        tf32(True)
        try:
            return model(v)
        finally:
            tf32(False)

    def eager_autocast(v):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(v)

    cases = {"eager fp32": eager_fp32, "eager tf32": eager_tf32, "eager bf16 autocast": eager_autocast}
    cases.update({f: new for f, new in zip(files, news)})
    with torch.no_grad():
        exact = model64(x.double())
        errors = {name: (fn(x).double() - exact).abs().max().item() for name, fn in cases.items()}
        scale = exact.abs().max().item()
    times = {name: [] for name in cases}
    order = list(cases.items())
    for r in range(ROUNDS):
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            times[name].append(time_calls(fn, x, 30).median_ms)
    base = statistics.median(times["eager fp32"])
    tf = statistics.median(times["eager tf32"])
    print(f"{torch.cuda.get_device_name(dev)}; {ref_path} input {tuple(x.shape)}; |output| max {scale:.3g}")
    for name in cases:
        ms = statistics.median(times[name])
        print(f"  {ms:8.3f} ms  {ms / base:6.3f}x eager fp32  {ms / tf:6.3f}x eager tf32  err {errors[name]:.2e}  {name}"
              f"  (rounds: {' '.join(f'{t:.3f}' for t in times[name])})")


if __name__ == "__main__":
    main(*sys.argv[1:])
