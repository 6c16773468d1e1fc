"""Where the host time of an emitted file's forward goes (session 11): probes inserted into a copy
of the file's Python (ModelNew.forward and _launch) record time.perf_counter() at each segment's
end; each call runs as KernelBench times it (synchronized before, CUDA events around the call);
medians over the calls, in microseconds from the call's start. Eager's call beside it.

    PYTHONPATH=. python3 docs/experiments/s11/host_segments.py REF.py FILE.py --dtype bf16
"""

import argparse
import statistics
import time

import torch

PROBES = [  # (text in the file, label of the point just before it)
    ("    library = _build(x.device, x.dtype)\n", "launch: entered (checks, BatchNorm args, copies done)"),
    ("    with _on(x.device):   # (its size", "launch: x, w aligned; out allocated"),
    ("    args.setdefault(\"z_out\", None)\n", "launch: workspace; parameters converted"),
    ("        error = getattr(library, f\"kgen_forward_{part}\")(*values)\n", "launch: arguments ready (before the C call)"),
    ("    if error is not None:\n        raise RuntimeError(f\"kgen kernel failed", "launch: the C call returned (kernels launched)"),
]


def probed(source: str) -> str:
    for text, label in PROBES:
        assert source.count(text) >= 1, text
        indent = text[:len(text) - len(text.lstrip())]
        source = source.replace(text, f"{indent}_T.append(({label!r}, _pc()))\n{text}", 1)
    return source.replace("import contextlib\n", "import contextlib\nfrom time import perf_counter as _pc\n_T = []\n", 1)


def load(source: str, name: str):
    ns = {"__name__": name}
    exec(compile(source, name, "exec"), ns)
    return ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("file")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    ref = load(open(a.ref).read(), "ref")
    new = load(probed(open(a.file).read()), "probed")
    (x,) = [t.cuda().to(dtype) for t in ref["get_inputs"]()]
    eager = ref["Model"](*ref["get_init_inputs"]()).cuda().to(dtype)
    model = new["ModelNew"](*new["get_init_inputs"]()).cuda().to(dtype)
    points: dict[str, list[float]] = {}
    kb = {"eager": [], "kgen": []}
    with torch.no_grad():
        for _ in range(5):
            eager(x), model(x)
        for _ in range(a.calls):
            for name, m in (("eager", eager), ("kgen", model)):
                torch.cuda.synchronize()
                new["_T"].clear()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                m(x)
                t1 = time.perf_counter()
                end.record()
                torch.cuda.synchronize()
                kb[name].append(start.elapsed_time(end))
                if name == "kgen":
                    for label, t in new["_T"]:
                        points.setdefault(label, []).append(1e6 * (t - t0))
                    points.setdefault("forward returned", []).append(1e6 * (t1 - t0))
    print(f"{torch.cuda.get_device_name()}; {a.file} in {a.dtype}: KernelBench-style median eager "
          f"{statistics.median(kb['eager']):.3f} ms, kgen {statistics.median(kb['kgen']):.3f} ms")
    for label, ts in points.items():
        print(f"  {statistics.median(ts):8.1f} us  {label}")


if __name__ == "__main__":
    main()
