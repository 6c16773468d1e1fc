"""Subprocess entry points of a search, so that a candidate that hangs, crashes or corrupts the
CUDA context costs only itself.

    python -m kgen.tune.worker build [--dtype D] FILE
    python -m kgen.tune.worker evaluate --tol 1e-4 [--tol 1e-2] [--batch B] [--iters N] [--dtype D] FILE... | -
    python -m kgen.tune.worker compare [--iters N] [--dtype D] FILE

`evaluate` prints one line `KGEN_RESULT {json}` per candidate as it finishes (with `-`, it reads
the files from stdin, one per line, as a search builds them), and exits after a candidate whose
run raised (the CUDA context may be unusable after an illegal access); the caller restarts it
on the remaining files. A search's worker, warm after its candidates, also takes the runoff and
the full validation (the search's last steps) as stdin lines of JSON (`{"runoff": [FILE...], "rounds": R, "iters": N}` ->
one line `KGEN_RUNOFF {json}`; `{"validate": FILE, "tol": T, "batch": B}` -> `kgen validate`'s
lines, then `KGEN_VALIDATED {"passed": ...}`; each answer with `"exiting"`, true where the CUDA
context was lost and the worker exits after it): no fresh process's start for them (Python,
torch, CUDA, the reference's trace: seconds each).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import traceback

from kgen.tune.configs import PRECISIONS, torch_dtype

RESULT_PREFIX = "KGEN_RESULT "
RUNOFF_PREFIX = "KGEN_RUNOFF "
VALIDATED_PREFIX = "KGEN_VALIDATED "
COMPARE_PREFIX = "KGEN_COMPARE "
EXIT_AFTER_RUNTIME_ERROR = 3


def build(path: str, dtype: str = "fp32", autocast: bool = False, fp32_weight: bool = False) -> int:
    from kgen.check.loading import EmittedFile

    EmittedFile(path, with_reference=False).build(torch_dtype(dtype), autocast, fp32_weight)
    return 0


def evaluate_one(path: str, tols: list[float], batch: int | None, iters: int, dtype: str = "fp32") -> dict:
    """The quick validation and the timing of one file, with the module and its input in
    `dtype` (eager in that dtype the yardstick and the baseline)."""
    from kgen.check.bench import bench
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import gate_description, validate, worst_error, worst_error_ratio

    module_dtype = torch_dtype(dtype)
    record: dict = {"path": path}
    try:
        f = EmittedFile(path)
        f.build(module_dtype)
        # allclose is monotone in the tolerance: passing the tightest tier passes them all, so
        # fp32-accurate candidates validate once; the others retry at the looser tiers, each
        # tier but the loosest given up at its first failed check (the loosest runs in full: its
        # failures are the candidate's record).
        passing: list[float] = []
        results = []
        for tol in sorted(tols):
            results = validate(f, tol=tol, quick=True, batch=batch, dtype=module_dtype,
                               stop_at_failure=tol != max(tols), own_heap=True)   # (the search's process)
            if all(r.passed for r in results):
                passing = [t for t in tols if t >= tol]
                break
    except Exception:  # noqa: BLE001 - a candidate that raises is data, not a crash of kgen
        record.update(status="runtime_error", detail=traceback.format_exc(limit=3)[-2000:])
        return record
    if not passing:
        failed = [r for r in results if not r.passed]
        crashed = any(r.crashed for r in failed)
        record.update(status="runtime_error" if crashed else "incorrect",
                      detail="; ".join(f"{r.name}: {r.detail}" for r in failed)[:2000])
        return record
    max_abs, max_rel = worst_error(results)
    b = bench(f, batch=batch, iters=iters, dtype=module_dtype)
    measured = b.measured(min(passing))
    measured.update(gate=gate_description(min(passing)), error_ratio=round(worst_error_ratio(results), 3))
    record.update(status="passed", passing_tols=sorted(passing), validation_max_abs=max_abs,
                  validation_max_rel=max_rel, measured=measured,
                  eager_tf32_ms=b.eager_tf32.median_ms)
    return record


def warm_up() -> None:
    """What a fresh process's first evaluation would otherwise do before its work, done while the
    search still builds: the checks' imports, CUDA's initialisation, the lazy imports of a
    meta-device tensor (sympy) and of torch.fx's first trace, and the GPU libraries' first calls
    (cuBLAS's handle and workspace, fp32 and fp64 GEMMs, the random generators a model's
    construction on the GPU draws from: the first evaluation took 1-2.6 s longer than the next
    on the H100 host, docs/perf.md session 26). A failure here is left to the evaluation, which
    reports it for its candidate."""
    try:
        import torch
        import torch.fx

        from kgen.check import bench, loading, validate  # noqa: F401

        with torch.device("meta"):
            torch.randn(1)
        torch.fx.symbolic_trace(torch.nn.Linear(1, 1))
        torch.cuda.init()
        with torch.device("cuda"):
            model = torch.nn.Linear(64, 64)
            x = torch.rand(64, 64)
            for dtype in (torch.float32, torch.float64):
                model.to(dtype)(x.to(dtype)).sum().backward()
        torch.cuda.synchronize()
        release_memory()
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def runoff_times(paths: list[str], rounds: int, iters: int, dtype: str = "fp32") -> dict:
    """kgen.check.bench.runoff of the files."""
    from kgen.check.bench import runoff as timed
    from kgen.check.loading import EmittedFile

    module_dtype = torch_dtype(dtype)
    files = [EmittedFile(p) for p in paths]
    for f in files:
        f.build(module_dtype)
    return timed(files, rounds, iters, dtype=module_dtype)


def full_validation(path: str, tol: float, batch: int | None, dtype: str = "fp32") -> dict:
    """`kgen validate FILE --tol T [--batch B]`'s checks, their lines printed as it prints them;
    returns {"passed": ...}."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import summary, validate

    module_dtype = torch_dtype(dtype)
    f = EmittedFile(path)
    f.build(module_dtype)
    results = validate(f, tol=tol, batch=batch, dtype=module_dtype, report=lambda r: print(r.line(), flush=True),
                       own_heap=True)   # (the search's process)
    print(summary(results), flush=True)
    return {"passed": all(r.passed for r in results)}


def release_memory() -> None:
    """Hands what this process's caching allocator keeps back to the GPU: between a search's
    candidates and requests its worker stays up, where the search may run a subprocess on the
    same GPU (a measurement at another batch, torch.compile's), or the next request may need
    it all (a full validation at 32768 x 32768)."""
    import torch

    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def command(line: str, dtype: str) -> bool:
    """A search's JSON request to its warm worker (the module docstring): prints the answer's
    line and returns whether this process must exit after it. A full validation stops at a
    check after which the CUDA context is lost: the answer then says `"exiting": true`, so
    that the search starts another worker for what follows rather than writing to this one."""
    from kgen.check.validate import cuda_context_lost

    request = json.loads(line)
    release_memory()
    if "runoff" in request:
        prefix, answer = RUNOFF_PREFIX, runoff_times(request["runoff"], request["rounds"], request["iters"], dtype)
    elif "validate" in request:
        prefix, answer = VALIDATED_PREFIX, full_validation(request["validate"], request["tol"], request.get("batch"), dtype)
    else:
        raise ValueError(f"unknown request: {line[:200]}")
    exiting = cuda_context_lost()
    print(prefix + json.dumps(dict(answer, exiting=exiting)), flush=True)
    return exiting


def compare(path: str, iters: int, dtype: str = "fp32") -> int:
    """Prints one line `KGEN_COMPARE {json}`: the file, eager and torch.compile of the reference
    (default mode and max-autotune), in `dtype`, timed in one run (kgen.check.bench.bench)."""
    from kgen.check.bench import bench
    from kgen.check.loading import EmittedFile

    module_dtype = torch_dtype(dtype)
    f = EmittedFile(path)
    f.build(module_dtype)
    b = bench(f, iters=iters, dtype=module_dtype, with_compile=True, with_autotune=True)
    ms = {"kgen_ms": b.new.median_ms, "eager_ms": b.eager_fp32.median_ms,
          "compile_ms": b.compiled.median_ms, "max_autotune_ms": b.autotuned.median_ms}
    print(COMPARE_PREFIX + json.dumps({"dtype": dtype, **{k: round(v, 4) for k, v in ms.items()}}), flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgen.tune.worker")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_build = sub.add_parser("build")
    p_build.add_argument("file")
    p_build.add_argument("--dtype", choices=sorted(PRECISIONS), default="fp32",
                         help="the build for a module in this dtype")
    p_build.add_argument("--autocast", action="store_true",
                         help="the 16-bit dtype's build for inside torch.autocast")
    p_build.add_argument("--fp32-weight", action="store_true",
                         help="with --autocast: an fp32 module's (its GEMM reads the fp32 weight, where the file has one)")
    p_eval = sub.add_parser("evaluate")
    p_eval.add_argument("--tol", type=float, action="append", required=True)
    p_eval.add_argument("--batch", type=int, default=None)
    p_eval.add_argument("--iters", type=int, default=30)
    p_compare = sub.add_parser("compare")
    p_compare.add_argument("--iters", type=int, default=30)
    for p in (p_eval, p_compare):
        p.add_argument("--dtype", choices=sorted(PRECISIONS), default="fp32",
                       help="the module and its input in this dtype (eager too)")
        p.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        return build(args.file, args.dtype, args.autocast, args.fp32_weight)
    if args.cmd == "compare":
        return max(compare(path, args.iters, args.dtype) for path in args.files)
    if args.files == ["-"]:
        warm_up()   # (a search's worker, started before its first candidate is built)
    files = (line.strip() for line in sys.stdin) if args.files == ["-"] else iter(args.files)
    for path in files:
        if not path:
            continue
        if path.startswith("{"):
            try:
                if command(path, args.dtype):
                    return EXIT_AFTER_RUNTIME_ERROR
            except Exception:  # noqa: BLE001 - the search reads the traceback as the reason
                traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
                return EXIT_AFTER_RUNTIME_ERROR
            release_memory()
            continue
        record = evaluate_one(path, args.tol, args.batch, args.iters, args.dtype)
        print(RESULT_PREFIX + json.dumps(record), flush=True)
        if record["status"] == "runtime_error":
            return EXIT_AFTER_RUNTIME_ERROR
        if args.files == ["-"]:
            release_memory()
    return 0


def exit_now(code: int) -> None:
    """Ends the process without the interpreter's teardown: a search waits for its worker's end
    before it reports, and the teardown of torch's objects and the CUDA context took ~1 s of the
    main job's there (docs/perf.md, session 27) with nothing in it for the search; the system
    frees the process's GPU context and files as it would after a crash. Output is flushed first
    (a search that closed its end of the pipe has nothing more to read). For `build` and
    `evaluate` (a build worker's end is waited for too); `compare` ends normally. KGEN_WORKER_TEARDOWN=1
    keeps the teardown, for what writes its results there: `python -m cProfile -o F -m
    kgen.tune.worker ...`, coverage."""
    if os.environ.get("KGEN_WORKER_TEARDOWN") == "1":
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    code = main()
    if sys.argv[1:2] == ["compare"]:
        sys.exit(code)   # (torch.compile's pool of compile workers is shut down in the teardown)
    exit_now(code)
