"""Session 47: the host time of an emitted file's inference forward, piece by piece: each piece
timed alone with the GPU idle before it (synchronized between calls; the median over REPS of the
host's time to return), so that the pieces' sum can be set beside the whole forward's.

    PYTHONPATH=. python3 docs/experiments/s47/launch_parts.py REF.py FILE.py {bf16,fp16,fp32}
"""
import inspect
import statistics
import sys
import time

import torch

REPS = 300


def load(path):
    ns = {"__name__": f"kgen_s47_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def host_us(fn):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main(ref_path, path, dtype_name):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    ref, ns = load(ref_path), load(path)
    init = ref["get_init_inputs"]()
    with torch.device("cuda"):
        eager = ref["Model"](*init).to(dtype).eval()
        model = ns["ModelNew"](*init).to(dtype).eval()
    model.load_state_dict(eager.state_dict())
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    lin = next(m for m in eager.modules() if isinstance(m, torch.nn.Linear))
    w, b = lin.weight, lin.bias
    device = x.device
    torch.set_grad_enabled(False)
    model(x)
    library = ns["_kgen_build"](device, dtype)
    captured = {}
    real = library.kgen_forward_0

    class Spy:
        def __getattr__(self, name):
            if name == "kgen_forward_0":
                return lambda *values: captured.setdefault("values", values) and real(*values)
            return getattr(library, name)
    built, spy = ns["_KGEN_BUILT"], Spy()
    keys = [k for k, v in built.items() if v is library]
    for k in keys:
        built[k] = spy
    ns["_KGEN_OUTPUT_TYPED"][spy] = ns["_KGEN_OUTPUT_TYPED"][library]
    model(x)
    for k in keys:
        built[k] = library
    values = captured["values"]
    M, N = x.shape[0], w.shape[0]
    rows = [
        ("ModelNew forward (whole)", lambda: model(x)),
        ("eager forward (whole)", lambda: eager(x)),
        ("eager F.linear alone", lambda: torch.nn.functional.linear(x, w, b)),
        ("kgen_forward_0 by ctypes, the forward's arguments", lambda: real(*values)),
        ("kgen_workspace_floats_0 by ctypes (a C call, no CUDA)", lambda: library.kgen_workspace_floats_0(M, N, x.shape[1])),
        ("torch.empty((M, N), dtype)", lambda: torch.empty((M, N), device=device, dtype=dtype)),
        ("torch.empty(1, fp32)", lambda: torch.empty(1, device=device, dtype=torch.float32)),
        ("x.new_empty(0, fp32)", lambda: x.new_empty(0, dtype=torch.float32)),
        ("_kgen_stream", lambda: ns["_kgen_stream"](device)),
        ("_kgen_checked_input", lambda: ns["_kgen_checked_input"](x, w)),
        # (session 48's files take the forward's answer about autocast: 0 here)
        ("_kgen_checked_param (weight)", lambda: ns["_kgen_checked_param"](w, x, None, "w", operand=True)
         if "autocast" not in inspect.signature(ns["_kgen_checked_param"]).parameters
         else ns["_kgen_checked_param"](w, x, None, "w", 0, operand=True)),
        ("_kgen_build (cached)", lambda: ns["_kgen_build"](device, dtype, False, False)),
        ("_kgen_traced", lambda: ns["_kgen_traced"]()),
        ("torch.is_autocast_enabled('cuda')", lambda: torch.is_autocast_enabled("cuda")),
        ("torch.compiler.is_compiling()", lambda: torch.compiler.is_compiling()),
        ("x.data_ptr()", lambda: x.data_ptr()),
    ]
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {path}; {dtype_name}; x {tuple(x.shape)}")
    for name, fn in rows:
        print(f"{host_us(fn):8.1f} us  {name}")


if __name__ == "__main__":
    main(*sys.argv[1:])
