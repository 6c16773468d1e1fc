"""KernelBench's own eval on kgen's files for KernelBench's published level-2 GEMM files.

    python scripts/kernelbench_corpus.py --kb .kb --files DIR [--json OUT.jsonl] REF.py...

For each reference REF (a KernelBench file, as published) and the kgen file DIR/<REF's name>:
KernelBench's `eval_kernel_against_ref` exactly as its harness calls it (fp32, seed 42, 5
correctness trials, 100 timed trials, cuda events; the reference and the new file exec'd in one
namespace), then kgen's replay of that eval (the same seeds and models, with an fp64 copy of the
reference: ModelNew's and eager fp32's max abs error against fp64) and kgen's bench (ModelNew and
eager fp32 timed in one process, L2 flushed: the ratio). One line per file, a markdown table at
the end. Needs a GPU and KernelBench's src/ (and its wheels' packages) on the path.

    python scripts/kernelbench_corpus.py --merge OUT1.jsonl OUT2.jsonl ... [--precision bf16]

prints the table and its summary from runs' records (several GPUs, each with its share of the
files: scripts/device_kernelbench.sh with GPUS), no GPU needed."""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from kgen.tune.configs import PRECISIONS


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kb", type=Path, help="KernelBench's folder (src/kernelbench)")
    p.add_argument("--files", type=Path, help="folder of the kgen files")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32",
                   help="KernelBench's precision: its eval casts models and inputs to it (tolerance "
                        "1e-4 for fp32, 1e-2 for bf16/fp16); the bench runs ModelNew and eager in it")
    p.add_argument("--compile", action="store_true", help="bench torch.compile (default mode) too")
    p.add_argument("--autotune", action="store_true", help='bench torch.compile(mode="max-autotune") too')
    p.add_argument("--merge", nargs="+", type=Path, default=None,
                   help="print the table of these records (JSON lines) and exit")
    p.add_argument("refs", nargs="*", type=Path)
    args = p.parse_args()
    if args.merge:
        print_table([json.loads(line) for path in args.merge for line in path.read_text().splitlines() if line],
                    args.precision)
        return
    if args.kb is None or args.files is None or not args.refs:
        p.error("--kb, --files and at least one REF are needed (or --merge)")
    sys.path.insert(0, str(args.kb / "src"))
    from kernelbench import eval as kb

    from kgen.check.bench import bench
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import check_kernelbench_eval

    dtype = getattr(torch, PRECISIONS[args.precision])
    rows = []
    for ref in args.refs:
        new = args.files / ref.name
        row = {"file": ref.name}
        start = time.monotonic()
        try:
            r = kb.eval_kernel_against_ref(ref.read_text(), new.read_text(), seed_num=42, num_correct_trials=5,
                                           num_perf_trials=100, measure_performance=True,
                                           timing_method="cuda_event", build_dir=None,
                                           precision=dtype)
            # (KernelBench's runtime is the mean of CUDA events' elapsed_time, in ms, whatever its
            # field's comment says (us); records before session 48 hold it divided by 1000.)
            row.update(compiled=r.compiled, correct=r.correctness, kb_ms=r.runtime if r.runtime > 0 else None,
                       kb_ref_ms=r.ref_runtime if r.ref_runtime > 0 else None,
                       kb_metadata={k: str(v)[:300] for k, v in r.metadata.items()
                                    if k not in ("hardware", "device")})
        except Exception as e:  # noqa: BLE001 - one file's failure is a row, not the end of the run
            row.update(compiled=False, correct=False, kb_error=f"{type(e).__name__}: {e}"[:300])
        try:
            f = EmittedFile(new, ref)
            if dtype == torch.float32:   # kgen's replay of KernelBench's fp32 eval, with fp64 beside
                c = check_kernelbench_eval(f, torch.device("cuda"), 1e-4)
                row.update(replay_passed=c.passed, err_new=c.max_abs, err_eager=c.ref_abs,
                           replay_line=c.line()[:400])
            b = bench(f, dtype=dtype, with_compile=args.compile, with_autotune=args.autotune)
            row.update(kgen_ms=b.new.median_ms, eager_ms=b.eager_fp32.median_ms, ratio=b.ratio)
            if dtype != torch.float32:
                row.update(err_new=b.max_abs_err, err_eager=b.eager_abs_err)
            if b.compiled:
                row.update(compile_ms=b.compiled.median_ms)
            if b.autotuned:
                row.update(autotune_ms=b.autotuned.median_ms)
        except Exception as e:  # noqa: BLE001
            row.update(kgen_error=f"{type(e).__name__}: {e}"[:300])
        row["seconds"] = round(time.monotonic() - start, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(row) + "\n")
        torch.cuda.empty_cache()
    print_table(rows, args.precision)


def faster_of_eager_and_autotune(row: dict) -> float | None:
    """kgen's time over the faster of eager's and torch.compile max-autotune's (issue 24's
    yardstick), where both were measured."""
    if not row.get("kgen_ms") or not row.get("eager_ms") or not row.get("autotune_ms"):
        return None
    return row["kgen_ms"] / min(row["eager_ms"], row["autotune_ms"])


def print_table(rows: list[dict], precision: str) -> None:
    """One line per file, then what the family comes to: files correct under KernelBench's eval,
    and the medians of kgen's time over eager's and over the faster of eager and max-autotune. A
    time no row measured (torch.compile's default mode where only max-autotune ran) has no
    column; one a row lacks is '-'."""
    rows = sorted(rows, key=lambda r: int(r["file"].split("_")[0]) if r["file"].split("_")[0].isdigit() else 0)

    def number(value, fmt: str) -> str:
        return "-" if value is None else f"{value:{fmt}}"

    columns = [  # (heading, cell)
        ("file", lambda r: r["file"]),
        (f"KernelBench eval ({precision})", lambda r: "correct" if r.get("correct") else "FAIL"),
        ("KB speedup", lambda r: f"{r['kb_ref_ms'] / r['kb_ms']:.2f}x" if r.get("kb_ms") and r.get("kb_ref_ms") else "-"),
        ("kgen ms", lambda r: number(r.get("kgen_ms"), ".3f")),
        (f"eager {precision} ms", lambda r: number(r.get("eager_ms"), ".3f")),
        ("ratio", lambda r: number(r.get("ratio"), ".3f")),
    ]
    if any(r.get("compile_ms") is not None for r in rows):
        columns.append(("compile ms", lambda r: number(r.get("compile_ms"), ".3f")))
    if any(r.get("autotune_ms") is not None for r in rows):
        columns += [("max-autotune ms", lambda r: number(r.get("autotune_ms"), ".3f")),
                    ("kgen / faster of eager and max-autotune", lambda r: number(faster_of_eager_and_autotune(r), ".3f"))]
    columns.append(("error vs fp64 (eager's)",
                    lambda r: f"{number(r.get('err_new'), '.1e')} ({number(r.get('err_eager'), '.1e')})"))
    print("\n| " + " | ".join(heading for heading, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print("| " + " | ".join(cell(r) for _, cell in columns) + " |")
    ratios = [r["ratio"] for r in rows if r.get("ratio") is not None]
    best = [b for b in map(faster_of_eager_and_autotune, rows) if b is not None]
    # (KernelBench's own timing: one synchronized call at a time, gradients on, so the host's work
    # before the kernels counts too; the bench's ratio is of calls queued under no_grad)
    own = [r["kb_ms"] / r["kb_ref_ms"] for r in rows if r.get("kb_ms") and r.get("kb_ref_ms")]
    summary = f"\n{sum(bool(r.get('correct')) for r in rows)} of {len(rows)} correct under KernelBench's eval"
    if own:
        summary += f"; KernelBench's own timing, kgen / eager: median {statistics.median(own):.3f}"
    if ratios:
        summary += f"; kgen / eager {precision} (kgen's bench): median {statistics.median(ratios):.3f}"
    if best:
        summary += f"; kgen / the faster of eager and max-autotune: median {statistics.median(best):.3f} ({len(best)} files)"
    print(summary)


if __name__ == "__main__":
    main()
