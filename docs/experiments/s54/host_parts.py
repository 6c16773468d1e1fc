"""Session 54: where one GEMM part's host time goes in eager training (gradients wanted) against
inference, piece by piece, for an emitted file. The file's module-level functions are wrapped to
capture the first forward's arguments; each piece is then called alone with them, the GPU idle
before each call (synchronized), and the host's time to return is the median of REPS calls:

- forward (training, gradients wanted) / (torch.no_grad); eager's the same;
- per part: _kgen_part_call as the forward calls it; the autograd.Function (_KGEN_AUTOGRAD);
  the body under no_grad with z kept and without; _kgen_launch; the C entry alone (ctypes);
  _kgen_w_split; _kgen_kept; an empty torch.autograd.Function's apply; a no-op ctypes call.
- MODE bf16: the module and input in bf16 (the C++ autograd node's path).

    PYTHONPATH=. python3 docs/experiments/s54/host_parts.py REF.py FILE.py [fp32|bf16]
"""
import ctypes
import statistics
import sys
import time

import torch

REPS = 300


def load(path):
    ns = {"__name__": f"kgen_s54_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def host_us(fn, reps=REPS):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main(ref_path, path, mode="fp32"):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[mode]
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init).to(dtype)
    ns = load(path)
    with torch.device("cuda"):
        model = ns["ModelNew"](*init)
    model.load_state_dict(eager.state_dict())
    model = model.to(dtype).train()
    eager.train()
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {path}; {mode}; x {tuple(x.shape)}; median of {REPS} host times, us")
    rows = []

    def row(name, fn):
        rows.append((name, host_us(fn)))
        print(f"| {name} | {rows[-1][1]:.1f} |", flush=True)

    print("| piece | host us |\n|---|---|")
    row("eager forward, training", lambda: eager(x))
    with torch.no_grad():
        row("eager forward, no_grad", lambda: eager(x))
    row("kgen forward, training", lambda: model(x))
    with torch.no_grad():
        row("kgen forward, no_grad", lambda: model(x))

    # capture each part's call and the C entries' arguments
    calls, entries, splits = {}, {}, {}
    part_call = ns["_kgen_part_call"]

    def capture_part(part, x_, w_, **args):
        calls.setdefault(part, (x_, w_, dict(args)))
        return part_call(part, x_, w_, **args)

    ns["_kgen_part_call"] = capture_part
    w_split = ns["_kgen_w_split"]

    def capture_split(*args):
        splits.setdefault(args[0], args)
        return w_split(*args)

    ns["_kgen_w_split"] = capture_split
    library = ns["_kgen_build"](x.device, x.dtype, False, False)
    for part, name in enumerate(ns["_KGEN_FORWARD_ENTRIES"]):
        original = getattr(library, name)

        def entry(*args, original=original, part=part):
            entries.setdefault(part, (original, args))
            return original(*args)

        setattr(library, name, entry)
    model(x)
    ns["_kgen_part_call"] = part_call
    ns["_kgen_w_split"] = w_split
    for part, name in enumerate(ns["_KGEN_FORWARD_ENTRIES"]):
        setattr(library, name, entries[part][0])

    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a.new_empty(0)

        @staticmethod
        def backward(ctx, g):
            return None, None

    libc = ctypes.CDLL(None)
    parameter = next(model.parameters())
    row("empty autograd.Function apply (x, w)", lambda: Empty.apply(x, parameter))
    row("ctypes no-op call (libc abs)", lambda: libc.abs(-3))
    row("torch.empty(1024x64)", lambda: torch.empty((1024, 64), device=x.device))
    for part in sorted(calls):
        x_, w_, args = calls[part]
        row(f"part {part}: _kgen_part_call (training)", lambda: part_call(part, x_, w_, **args))
        if ns["_KGEN_AUTOGRAD"][part] is not None:
            row(f"part {part}: autograd.Function", lambda: ns["_KGEN_AUTOGRAD"][part](x_, w_, **dict(args)))
        impl = ns["_KGEN_IMPLS"][part]
        with torch.no_grad():
            row(f"part {part}: body, z kept", lambda: impl(x_, w_, **args))
            row(f"part {part}: body, no z", lambda: impl(x_, w_, **{**args, "keep_z": 0}))
        row(f"part {part}: _kgen_kept", lambda: ns["_kgen_kept"](x_, w_, 0, 0, args.get("keep_z", 0)))
        original, entry_args = entries[part]
        row(f"part {part}: C entry alone", lambda: original(*entry_args))
        if part in splits:
            row(f"part {part}: _kgen_w_split", lambda: w_split(*splits[part]))


if __name__ == "__main__":
    main(*sys.argv[1:])
