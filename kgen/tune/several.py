"""Several reference files searched at once, one search per GPU (or group of GPUs).

`kgen search A.py B.py ... --gpus N` with several files and several GPUs: a file's search is
mostly its builds (CPU) and its one full validation (one GPU), so spreading one file's candidates
over the GPUs leaves them idle most of the time. Here each GPU group runs whole searches, one file
after another from a shared list (two files of one name never at once), each a `kgen search FILE`
subprocess with CUDA_VISIBLE_DEVICES naming its group: every measurement of a file, its eager
baseline, runoff and full validation included, is taken on that group's GPUs, so the file's
ratios compare as in a search of its own.
The searches share the measurement cache and the output folders (both written under a lock:
search.locked) and the host's cores (each builds with its share).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable


def host_gpu(gpu: int) -> str:
    """How the host names GPU `gpu` of this process: through this process's CUDA_VISIBLE_DEVICES
    where it has one (an index or a UUID, as written there), else the index itself. A record says
    this, so that a search run with CUDA_VISIBLE_DEVICES=1 (one of several run at once) names
    the GPU that measured it. (Here, not in search.py: a parent searching several files needs
    no torch.)"""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    tokens = [t.strip() for t in visible.split(",")] if visible is not None else None
    return tokens[gpu] if tokens is not None and gpu < len(tokens) else str(gpu)


def gpu_groups(gpus: list[int], files: int) -> list[list[int]]:
    """The GPUs split into min(files, GPUs) groups of consecutive GPUs, as equal as they come: with
    at least as many files as GPUs, one GPU per search; with fewer, each search spreads its
    candidates over its group (the GPUs left over go to the first groups)."""
    n = max(1, min(files, len(gpus)))
    size, extra = divmod(len(gpus), n)
    groups, start = [], 0
    for g in range(n):
        end = start + size + (1 if g < extra else 0)
        groups.append(gpus[start:end])
        start = end
    return groups


@dataclasses.dataclass
class FileSearch:
    """One file's search as it ran: where, how long, and its summary (none if it crashed)."""
    ref: str
    group: list[str]          # the host's names of the GPUs it ran on
    exit_code: int | None = None
    wall_s: float = 0.0
    record: dict | None = None


SEARCH_COMMAND = [sys.executable, "-m", "kgen.cli", "search"]


def search_files(refs: list[str], gpus: list[int], child_args: list[str], jobs: int,
                 echo: Callable[[str], None] = print,
                 command: list[str] = SEARCH_COMMAND) -> tuple[list[FileSearch], float]:
    """Searches every file in `refs`, one `kgen search` subprocess per GPU group at a time, in the
    order given (a free group takes the next file). child_args: the search's options for one
    file (tolerances, math modes, folders, ...), without --gpus and --jobs: each search gets
    `jobs` parallel builds. Each line a search prints is echoed as `[gpu G] line`. Returns each
    file's FileSearch (in `refs`' order) and the wall time of the whole. command: what runs one
    file's search (tests: a fake)."""
    groups = gpu_groups(gpus, len(refs))
    # Files not taken yet, in order. Two files of one name (a/model.py, b/model.py; or one file
    # given twice) never run at once: a search names its work folder, record and winner after the
    # file's stem and shape, and they would write each other's.
    pending = list(enumerate(refs))
    names_running: set = set()
    taking = threading.Condition()
    results: list[FileSearch | None] = [None] * len(refs)
    lock = threading.Lock()
    running: set = set()            # the searches' processes still running
    stop = threading.Event()        # the parent was interrupted: start no more searches
    started = time.monotonic()

    def take() -> tuple[int, str] | None:
        """The next file whose name no running search has; None when none is left (or stop)."""
        with taking:
            while not stop.is_set() and pending:
                for k, (i, ref) in enumerate(pending):
                    if Path(ref).name not in names_running:
                        del pending[k]
                        names_running.add(Path(ref).name)
                        return i, ref
                taking.wait()
            return None

    def release(ref: str):
        with taking:
            names_running.discard(Path(ref).name)
            taking.notify_all()

    def say(line: str):
        with lock:
            echo(line)

    def search_one(i: int, ref: str, names: list[str], tag: str, env: dict, result: FileSearch):
        say(f"=== [{i + 1}/{len(refs)}] {ref} on GPU {', '.join(names)}")
        with tempfile.TemporaryDirectory(prefix="kgen-search-") as tmp:
            summary = Path(tmp) / "summary.json"
            cmd = [*command, ref, *child_args,
                   "--gpus", str(len(names)), "--jobs", str(jobs), "--summary-json", str(summary)]
            t0 = time.monotonic()
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
            with lock:
                running.add(proc)
            try:
                for line in proc.stdout:
                    say(f"{tag} {line.rstrip()}")
                result.exit_code = proc.wait()
            finally:
                if proc.poll() is None:   # the echo failed (a closed stdout): no search left behind
                    proc.kill()
                    proc.wait()
                with lock:
                    running.discard(proc)
            result.wall_s = time.monotonic() - t0
            try:
                rows = json.loads(summary.read_text())
                result.record = json.loads(Path(rows[0]["record_path"]).read_text())
            except (OSError, ValueError, IndexError, KeyError, TypeError):
                result.record = None   # it crashed before its summary: said in the table

    def worker(group: list[int]):
        names = [host_gpu(g) for g in group]
        tag = f"[gpu {','.join(names)}]"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(names))
        while (taken := take()) is not None:
            i, ref = taken
            result = FileSearch(ref, names)
            try:
                search_one(i, ref, names, tag, env, result)
            except Exception as e:  # noqa: BLE001 - one file's search that cannot run costs that file only
                result.record = None
                try:
                    say(f"{tag} the search of {ref} did not run: {type(e).__name__}: {e}")
                except Exception:  # noqa: BLE001 - nowhere to say it
                    pass
            finally:
                # every file taken has its result (none: no record), so that no file is dropped
                # from the table and the exit code
                results[i] = result
                release(ref)
            verdict = ("no record" if result.record is None else
                       "a winner" if result.record.get("winners") else "no candidate passed")
            try:
                say(f"--- [{i + 1}/{len(refs)}] {Path(ref).name} on GPU {', '.join(names)}: {verdict}, "
                    f"exit {result.exit_code}, {result.wall_s:.1f} s")
            except Exception:  # noqa: BLE001 - the result is kept all the same
                pass

    threads = [threading.Thread(target=worker, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()
    try:
        with _terminate_as_exit():
            for t in threads:
                t.join()
    except BaseException:
        # Ctrl-C (or any error) in the parent: the searches running end with it, none left
        # holding a GPU. A terminal's Ctrl-C reached them too: a moment to end on their own first.
        stop.set()
        with taking:
            taking.notify_all()
        _end(running, lock)
        raise
    return [r if r is not None else FileSearch(ref, []) for ref, r in zip(refs, results)], time.monotonic() - started


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM and SIGHUP (a batch scheduler's cancel, a closed terminal) raise SystemExit in the
    main thread while the searches run, as Ctrl-C raises KeyboardInterrupt: either way the parent
    ends its searches before it goes (their default would end the parent alone, leaving the
    searches running on their GPUs). Outside the main thread, nothing to install."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, _frame):
        raise SystemExit(128 + signum)

    before = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _end(running: set, lock: threading.Lock, grace_s: float = 5.0):
    """Ends the processes in `running`: each given `grace_s` to exit, then SIGTERM, then SIGKILL."""
    with lock:
        procs = list(running)
    deadline = time.monotonic() + grace_s
    for sig in ("wait", "terminate", "kill"):
        for proc in procs:
            if proc.poll() is None and sig != "wait":
                getattr(proc, sig)()
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if all(proc.poll() is not None for proc in procs):
            return
        deadline = time.monotonic() + grace_s
