"""Session 47: the Python part of an emitted file's inference forward on a machine without a GPU.
The file's CUDA-facing pieces are replaced (the library by a C function of libc that returns
NULL, taking the forward's arguments; the stream, device guard and the CUDA checks), and its
ModelNew runs on CPU tensors in the module's dtype: what is left is the Python and torch's
host-side calls of the forward. Prints the time per forward (median of rounds) and a cProfile.

    python docs/experiments/s47/cpu_forward_host.py REF.py {bf16,fp16,fp32} FILE.py [FILE.py ...] [--profile]
"""
import contextlib
import cProfile
import ctypes
import ctypes.util
import pstats
import statistics
import sys
import time

import torch


def load(path):
    ns = {"__name__": f"kgen_s47_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def fake_library(ns):
    libc = ctypes.CDLL(ctypes.util.find_library("c"))

    class Library:
        pass
    library = Library()
    for part, args in enumerate(ns["_KGEN_FORWARD_ARGS"]):
        # sched_yield: a C function that returns 0 (NULL: success) and ignores the arguments
        # (x86-64's calling convention), called as the forward's entry point is, through ctypes.
        fn = ctypes.CFUNCTYPE(ctypes.c_char_p, *[t for _, t in args])(ctypes.cast(libc.sched_yield, ctypes.c_void_p).value)
        setattr(library, f"kgen_forward_{part}", fn)
        setattr(library, f"kgen_workspace_floats_{part}", lambda M, N, K: 0)
    ns["_KGEN_OUTPUT_TYPED"][library] = tuple(True for _ in ns["_KGEN_FORWARD_ARGS"])
    return library


def prepared(ref, path, dtype):
    """FILE's ModelNew with its CUDA-facing pieces replaced, in `dtype`, and its input."""
    ns = load(path)
    library = fake_library(ns)
    ns["_kgen_build"] = lambda *a, **k: library
    ns["_kgen_stream"] = lambda device: 0
    ns["_kgen_on"] = lambda device: contextlib.nullcontext()
    checked = ns["_kgen_checked_input"]
    ns["_kgen_checked_input"] = lambda x, weight: _as_cuda(checked, x, weight)
    model = ns["ModelNew"](*ref["get_init_inputs"]()).to(dtype).eval()
    return model


def main(ref_path, dtype_name, *args):
    """Each FILE's forward timed in rounds that alternate between the files (one process: the
    machine's drift falls on all alike); the fastest round and the median per file."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    paths = [a for a in args if not a.startswith("--")]
    ref = load(ref_path)
    models = {path: prepared(ref, path, dtype) for path in paths}
    x = ref["get_inputs"]()[0][:64].to(dtype)
    torch.set_grad_enabled(False)
    rounds = {path: [] for path in paths}
    for _ in range(30):
        for path, model in models.items():
            model(x)
            t0 = time.perf_counter()
            for _ in range(1000):
                model(x)
            rounds[path].append((time.perf_counter() - t0) / 1000 * 1e6)
    for path in paths:
        print(f"{path}: {min(rounds[path]):.1f} us a forward (the fastest of 30 rounds of 1000; "
              f"median {statistics.median(rounds[path]):.1f})")
    if "--profile" in args:
        for path, model in models.items():
            p = cProfile.Profile()
            p.enable()
            for _ in range(3000):
                model(x)
            p.disable()
            print(f"== {path}")
            pstats.Stats(p).sort_stats("tottime").print_stats(25)


def _as_cuda(checked, x, weight):
    # _kgen_checked_input raises for a CPU tensor after its other checks: skip that one.
    try:
        return checked(x, weight)
    except ValueError as e:
        if "runs on CUDA tensors" not in str(e):
            raise
        return x


if __name__ == "__main__":
    main(*sys.argv[1:])
