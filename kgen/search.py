"""Search: enumerate specs -> render -> write -> build (parallel) -> validate + bench (one GPU,
isolated worker) -> record, and keep the fastest valid file per tolerance tier.

Failure is data: every candidate ends with a status (compile_error, incorrect, runtime_error,
timeout, passed) and its error text, and one bad candidate never stops the search.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from . import generator
from .spec import Spec, SpecError, Tile
from .worker import EXIT_AFTER_RUNTIME_ERROR, RESULT_PREFIX

# Tiles tried per GEMM family. SIMT: (BM, BN, BK, WM, WN, TM, TN). mma.sync: (BM, BN, BK, WM, WN, stages).
SIMT_TILES = [
    (128, 128, 8, 64, 64, 8, 16),
    (128, 128, 16, 32, 64, 8, 8),
    (256, 128, 8, 64, 64, 8, 16),
    (128, 128, 8, 32, 64, 8, 8),
    (128, 128, 8, 64, 32, 8, 8),
    (64, 64, 8, 32, 32, 4, 8),
]
# tf32x3 keeps partial accumulators beside the main ones, so its warp tiles stay at 64x32.
# Each list is ordered fastest-measured first (docs/perf.md), so `--top N` keeps the best N.
TF32X3_TILES = [
    (128, 128, 64, 64, 32, 3),  # BK=64: half the partial-accumulator flushes of BK=32
    (128, 128, 32, 32, 64, 3),
    (128, 128, 64, 64, 32, 2),
    (128, 128, 32, 64, 32, 3),
    (128, 128, 32, 64, 32, 4),
    (256, 64, 32, 64, 32, 3),
    (128, 64, 32, 64, 32, 4),
]
# TF32 and BF16 (loose tolerances only): the large warp tiles measured fastest.
FAST_MMA_TILES = [
    (128, 256, 32, 64, 64, 3),
    (128, 128, 32, 64, 64, 3),
]
# wgmma (sm_90a, warp-specialized): (BM, BN, stages); the warp tile is 16 x BN. Fastest-measured
# first (tests/cuda/wgmma_selftest.cu, docs/perf.md), and ahead of the mma.sync tiles of the
# same math mode, which they beat.
WGMMA_TILES = {
    "tf32x3": [(128, 128, 4), (128, 128, 3), (128, 64, 6)],
    "tf32": [(128, 256, 4), (128, 128, 6)],
}
GROUP_M = 8
DEFAULT_MATHS = ("fp32_simt", "tf32x3", "tf32", "bf16")
CUBLAS_MATHS = ("fp32_simt", "tf32", "bf16")
STATUSES = ("passed", "incorrect", "runtime_error", "compile_error", "timeout")


def enumerate_specs(problem: str, batch: int, in_features: int, out_features: int,
                    maths=DEFAULT_MATHS, arch: str = "sm_90a", include_cublas: bool = True,
                    top: int | None = None) -> list[Spec]:
    """Every valid spec of the search space (invalid tile/shape combinations are dropped);
    `top` keeps only the first (fastest-measured) tiles of each math mode."""
    shape = dict(problem=problem, batch=batch, in_features=in_features, out_features=out_features, arch=arch)
    specs: list[Spec] = []

    def add(**kw):
        try:
            specs.append(Spec(**shape, **kw))
        except SpecError:
            return

    for math in maths:
        # (backend, tile) pairs of this math mode, fastest-measured first.
        tiles: list[tuple[str, Tile]] = []
        if math == "fp32_simt":
            tiles += [("kgen", Tile(bm, bn, bk, wm, wn, tm=tm, tn=tn, group_m=GROUP_M))
                      for bm, bn, bk, wm, wn, tm, tn in SIMT_TILES]
        else:
            if arch == "sm_90a":
                tiles += [("wgmma", Tile(bm, bn, 32, 16, bn, stages=st, group_m=GROUP_M))
                          for bm, bn, st in WGMMA_TILES.get(math, [])]
            tiles += [("kgen", Tile(bm, bn, bk, wm, wn, stages=st, group_m=GROUP_M))
                      for bm, bn, bk, wm, wn, st in (TF32X3_TILES if math == "tf32x3" else FAST_MMA_TILES)]
        tiles = tiles[:top] if top else tiles
        for backend, tile in tiles:
            add(math=math, backend=backend, fusion=2, tile=tile)
        # One unfused variant per math mode shows what the fused statistics save.
        add(math=math, backend=tiles[0][0], fusion=1, tile=tiles[0][1])
        if include_cublas and math in CUBLAS_MATHS:
            add(math=math, backend="cublas", fusion=1)
    return specs


@dataclasses.dataclass
class Candidate:
    spec: Spec
    path: Path
    status: str = "pending"
    detail: str = ""
    build_s: float = 0.0
    record: dict = dataclasses.field(default_factory=dict)

    @property
    def measured(self) -> dict | None:
        return self.record.get("measured")

    def summary(self) -> dict:
        return {"name": self.spec.name(), "key": self.spec.key(), "spec": self.spec.to_dict(),
                "status": self.status, "detail": self.detail, "build_s": round(self.build_s, 1),
                **{k: v for k, v in self.record.items() if k not in ("path", "status", "detail")}}


def _build(c: Candidate, timeout: float, env: dict) -> Candidate:
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "kgen.worker", "build", str(c.path)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        c.status, c.detail = "timeout", f"build took longer than {timeout:.0f} s"
    else:
        if proc.returncode != 0:
            c.status, c.detail = "compile_error", (proc.stdout + proc.stderr)[-3000:]
        else:
            c.status = "built"
    c.build_s = time.monotonic() - start
    return c


def build_all(candidates: list[Candidate], jobs: int, timeout: float, echo) -> None:
    env = dict(os.environ, MAX_JOBS="2")  # two translation units per extension
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for c in pool.map(lambda c: _build(c, timeout, env), candidates):
            done += 1
            echo(f"  build [{done}/{len(candidates)}] {c.status:<13} {c.build_s:5.0f} s  {c.spec.name()}")


def _reader(stream, q: queue.Queue):
    for line in stream:
        q.put(line)
    q.put(None)


def evaluate_all(candidates: list[Candidate], tols: list[float], batch: int | None, iters: int,
                 timeout: float, echo, on_result: Callable[[], None] = lambda: None) -> None:
    """Runs the built candidates through one worker process at a time; a worker that crashes
    or hangs is replaced and the candidate it was on is marked."""
    pending = [c for c in candidates if c.status == "built"]
    by_path = {str(c.path): c for c in pending}
    total, done = len(pending), 0
    while pending:
        cmd = [sys.executable, "-m", "kgen.worker", "evaluate", "--iters", str(iters)]
        for t in tols:
            cmd += ["--tol", repr(t)]
        if batch:
            cmd += ["--batch", str(batch)]
        cmd += [str(c.path) for c in pending]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        log: list[str] = []
        current = pending[0]
        while True:
            try:
                line = q.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                current.status, current.detail = "timeout", f"no result within {timeout:.0f} s"
                break
            if line is None:
                proc.wait()
                if current in pending and proc.returncode not in (0, EXIT_AFTER_RUNTIME_ERROR):
                    current.status = "runtime_error"
                    current.detail = f"worker exited with {proc.returncode}: " + "".join(log[-20:])[-2000:]
                break
            if not line.startswith(RESULT_PREFIX):
                log.append(line)
                continue
            record = json.loads(line[len(RESULT_PREFIX):])
            c = by_path[record["path"]]
            c.record, c.status, c.detail = record, record["status"], record.get("detail", "")
            pending.remove(c)
            done += 1
            m = c.measured
            timing = f"{m['median_ms']:.3f} ms, {m['ratio']:.3f}x eager" if m else ""
            echo(f"  eval  [{done}/{total}] {c.status:<13} {timing:<26} {c.spec.name()}")
            on_result()
            if pending:
                current = pending[0]
        pending = [c for c in pending if c.status == "built"]


def results_table(candidates: list[Candidate]) -> str:
    rows = [f"{'status':<13} {'median ms':>9} {'x eager':>8} {'max abs err':>11} {'tols':<14} name"]
    order = sorted(candidates, key=lambda c: (c.status != "passed",
                                              c.measured["median_ms"] if c.measured else 0.0))
    for c in order:
        m = c.measured
        if m:
            tols = ",".join(f"{t:g}" for t in c.record.get("passing_tols", []))
            rows.append(f"{c.status:<13} {m['median_ms']:>9.3f} {m['ratio']:>8.3f} "
                        f"{m['max_abs_err']:>11.2e} {tols:<14} {c.spec.name()}")
        else:
            first = c.detail.strip().splitlines()[-1][:80] if c.detail.strip() else ""
            rows.append(f"{c.status:<13} {'-':>9} {'-':>8} {'-':>11} {'-':<14} {c.spec.name()}  {first}")
    return "\n".join(rows)


def full_validation(path: Path, tol: float, timeout: float) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, "-m", "kgen.cli", "validate", str(path), "--tol", repr(tol)],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode == 0, proc.stdout + proc.stderr


def other_files_for_shape(out_dir: Path, shape: str, winners: dict) -> list[Path]:
    """Emitted files in out_dir for this problem and shape that this search did not write (an
    earlier search's winners, a hand-made variant): kept, but named, so that nobody mistakes
    them for the current winners."""
    current = {Path(w["path"]).name for w in winners.values()}
    return sorted(p for p in out_dir.glob(f"{shape}_*.py") if p.name not in current)


def run_search(problem: str, batch: int, in_features: int, out_features: int, tols: list[float],
               maths=DEFAULT_MATHS, jobs: int = 8, work_dir: Path = Path(".kgen_work"),
               out_dir: Path = generator.DEFAULT_OUTPUT_DIR, results_dir: Path = Path("results"),
               build_timeout: float = 900, eval_timeout: float = 300, iters: int = 30,
               top: int | None = None, arch: str = "sm_90a",
               echo: Callable[[str], None] = print) -> dict:
    specs = enumerate_specs(problem, batch, in_features, out_features, maths, arch=arch, top=top)
    shape = f"{problem}_b{batch}_i{in_features}_o{out_features}"
    echo(f"search {shape} for {arch}: {len(specs)} valid specs, "
         f"tolerances {', '.join(f'{t:g}' for t in tols)}")
    cand_dir = work_dir / shape
    candidates = [Candidate(s, generator.write(s, cand_dir / f"{s.name()}.py")) for s in specs]
    winners: dict = {}
    tol_tag = "_".join(f"{t:g}" for t in sorted(tols))
    record_path = results_dir / f"search_{shape}_tol{tol_tag}.json"
    results_dir.mkdir(parents=True, exist_ok=True)

    def save():
        """Rewritten after every result, so an interrupted search keeps what it measured."""
        record = {"search": shape, "tols": tols, "winners": winners,
                  "candidates": [c.summary() for c in candidates]}
        generator.write_atomic(record_path, json.dumps(record, indent=1))
        return record

    build_all(candidates, jobs, build_timeout, echo)
    save()
    evaluate_all(candidates, tols, None, iters, eval_timeout, echo, on_result=save)
    echo(results_table(candidates))

    for tol in sorted(tols):
        passing = sorted((c for c in candidates if c.status == "passed" and tol in c.record["passing_tols"]),
                         key=lambda c: c.measured["median_ms"])
        for c in passing:
            ok, log = full_validation(c.path, tol, eval_timeout * 3)
            if ok:
                measured = dict(c.measured, tol=tol)
                path = generator.write(c.spec, out_dir / f"{c.spec.name()}.py", measured=measured)
                winners[f"{tol:g}"] = {"name": c.spec.name(), "path": str(path), "measured": measured}
                save()
                echo(f"tol {tol:g}: fastest valid is {c.spec.name()} "
                     f"({measured['median_ms']:.3f} ms, {measured['ratio']:.3f}x eager fp32) -> {path}")
                break
            c.record.setdefault("full_validation_failures", {})[f"{tol:g}"] = log[-2000:]
            echo(f"tol {tol:g}: {c.spec.name()} failed full validation; trying the next")
        else:
            echo(f"tol {tol:g}: no candidate passed")

    others = other_files_for_shape(out_dir, shape, winners) if out_dir.is_dir() else []
    if others:
        echo(f"also in {out_dir} for this shape, not winners of this search (left as they are): "
             + ", ".join(p.name for p in others))
    echo(f"record: {record_path}")
    return save()
