"""The CPU tier's nvcc jobs (tests/test_compile.py's harness, used by every test that compiles an
extension): most of the tier's CPU time. Each job runs once per run (its result is left in the
run's folder, conftest.NVCC_RESULTS, for every pytest-xdist worker), and the jobs of the
collected tests that say what they compile (the `nvcc_jobs` marker) start at collection, the
longest first, in the background of each worker while the tests run; a test then waits for its
own result only, or runs its job itself where no worker has started it yet.

Two kinds of job:
- a report: the kernels' ptxas report (spills) and every compile error, for the given targets.
  nvcc stops at the fat binary (`-fatbin`): the same front end, cicc and ptxas runs as `-c`, but
  not cudafe++'s host split and g++ compile of the host code: 10-35 % of a translation unit's
  time. The device pass's front end checks the host code as well (every C entry point, every
  template they instantiate: test_a_host_code_error_fails_a_report), and nothing in the sources
  hides host code from it behind __CUDA_ARCH__ (compile_report checks every source). g++ still
  compiles the host code of the programs below and of test_an_extension_exports_its_entry_points_only.
- a program: the source built (device code, host code, link) into an executable, which is run.
- a check: a report read only for what a test asserts of most sources: that it compiles, no
  kernel spills, and no value goes unread (#177). Checks of emitted extensions with one kernel
  library (merge_key) are compiled together, a few to a translation unit (merged_source): their
  GEMM parts renumbered side by side, every kernel of each is the same instantiation as alone,
  and the kernels they share (the GEMM with a plain store, the backward's transposes and sums,
  about half a translation unit's time) are compiled once. A check whose merged unit fails to
  compile or spills is compiled alone for its own report, and so is one whose unit finds an unread
  value on the library's lines (a template there warns once any source instantiates it); else its report is
  the unit's kernels and warnings of its own parts and of no part. (A namespace-scope value of
  the library that another merged source reads goes unreported; which checks share a unit
  depends on the tests collected.)
"""

import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from torch.utils import cpp_extension

NVCC = shutil.which("nvcc")
SM80 = "-gencode=arch=compute_80,code=sm_80"
SM90A = "-gencode=arch=compute_90a,code=sm_90a"
PTX90A = "-gencode=arch=compute_90a,code=compute_90a"
# torch's load_inline adds COMMON_NVCC_FLAGS to every nvcc call of an emitted file's build (no
# implicit half / bfloat16 conversions among them): the jobs see what a user's build sees. (A
# 16-bit GroupNorm that converted a float to bf16 implicitly compiled here and not on the GPU.)
COMMON = ("-std=c++17", "-O3", *cpp_extension.COMMON_NVCC_FLAGS, "-Xptxas", "-v")
# Host code the device pass would not see: a __CUDA_ARCH__ test other than the wgmma header's
# guard that stops a build for a target without sm_90a's features (kernels/gemm_wgmma.cuh).
ALLOWED_ARCH_TEST = "#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)"
HOST_HIDDEN = re.compile(r"__CUDA_ARCH__")


class Job(NamedTuple):
    kind: str       # "report" or "program"
    source: str
    flags: tuple    # targets, -D..., as nvcc takes them

    def cost(self) -> int:
        """A guess at the job's time, to start the longest first: the source's size per
        machine-code target (a PTX-only program build is mostly host code)."""
        return len(self.source) * (1 + sum("code=sm_" in f for f in self.flags))


def report_job(source: str, flags) -> Job:
    return Job("report", source, tuple(flags))


def check_job(source: str, flags) -> Job:
    return Job("check", source, tuple(flags))


def program_job(source: str, flags) -> Job:
    return Job("program", source, tuple(flags))


def host_hidden_lines(source: str) -> list[str]:
    """Lines of `source` that test __CUDA_ARCH__ other than ALLOWED_ARCH_TEST: host code behind
    them would be compiled by g++ only, which a report job does not run."""
    return [line for line in source.splitlines() if HOST_HIDDEN.search(line) and line.strip() != ALLOWED_ARCH_TEST]


# Spills a kernel is known to have, and was measured with: kernel name fragment -> the most bytes of
# spill stores and of spill loads. fp16x3's GEMM with an operand split in registers (w, or x at
# narrow outputs), at a 128x128 tile, holds 64 accumulators, 64 of a k-tile's partial sum and the
# k-tile's 32 A fragment registers under the 168 a thread of its 384 may have; ptxas spills 8
# bytes of it (docs/perf.md, session 22: timed with them, 1.99-2.04 ms at 128 x 32768 -> 32768;
# holding fewer fragments at a time, a wgmma group per k-step, was 5-10 % slower, and deriving a
# descriptor instead of holding it spilled 28 bytes). (x in registers at 128x128, with the spill,
# session 53: slower than at BN = 64 for its products, which the rule's narrow tiles take.)
KNOWN_SPILLS = {"wgmma_f16x3_in_registers_kernel": 8}


def spills(report: str) -> list[str]:
    """Kernels whose ptxas report shows spill stores or loads (beyond KNOWN_SPILLS)."""
    bad, kernel = [], None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(\w+)'", line)
        if m:
            kernel = f"{m.group(1)} ({m.group(2)})"
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        allowed = max([b for name, b in KNOWN_SPILLS.items() if kernel and name in kernel], default=0)
        if m and max(int(m.group(1)), int(m.group(2))) > allowed:
            bad.append(f"{kernel}: {line.strip()}")
    return bad


# ---- Emitted extensions compiled together (check jobs) ----------------------------------------
# An emitted extension's source (kgen/codegen/templates/kernel.cu.j2): a first comment line, the
# kernel library and its settings, then per GEMM part a namespace kgen_part<k> and the C entry
# points kgen_*_<k>, then the end of the hidden-visibility region (and, for a program, a main).
_PARTS_START = "\n// ---- GEMM part 0 of "
_PARTS_END = "\n#pragma GCC visibility pop\n"
_PART_COUNT = re.compile(r"// ---- GEMM part 0 of (\d+):")
_PART_NAMESPACE = re.compile(r"\bkgen_part(\d+)\b")
# (an entry point defined, or called by another: kgen_backward_packed_<k> calls kgen_backward_<k>)
_ENTRY_POINT = re.compile(r"(\bkgen_[a-z_]+?_)(\d+)(\()")
MERGED_AT_MOST = 8   # sources to a merged translation unit


def extension_pieces(source: str):
    """(the library: everything before the first GEMM part but the first line; the parts; the
    rest) of an emitted extension's source, or None for another source."""
    if not source.startswith("// kgen "):
        return None
    start, end = source.find(_PARTS_START), source.rfind(_PARTS_END)
    if start < 0 or end < start:
        return None
    return source[source.index("\n"):start + 1], source[start + 1:end + 1], source[end + 1:]


def merge_key(source: str):
    """Sources of one merge_key (not None) can be compiled as one translation unit."""
    pieces = extension_pieces(source)
    return None if pieces is None else (pieces[0], pieces[2])


class Merged(NamedTuple):
    source: str
    first_part: tuple   # per source, the number of its first GEMM part in the merged unit
    lines: tuple        # per source, the merged unit's (first, last) line of its parts


def merged_source(sources) -> Merged:
    """One translation unit of the GEMM parts of `sources` (of one merge_key), renumbered one after
    the other: namespaces kgen_part<k> and entry points kgen_*_<k>."""
    pieces = [extension_pieces(s) for s in sources]
    assert len({(p[0], p[2]) for p in pieces}) == 1, "sources of different kernel libraries"
    text = (f"// kgen: the GEMM parts of {len(sources)} emitted extensions in one translation unit "
            "(tests/nvcc_jobs.py, merged_source)" + pieces[0][0])
    first_part, lines, base = [], [], 0
    for _, parts, _ in pieces:
        count = int(_PART_COUNT.match(parts).group(1))
        parts = _PART_NAMESPACE.sub(lambda m, b=base: f"kgen_part{b + int(m.group(1))}", parts)
        parts = _ENTRY_POINT.sub(lambda m, b=base: f"{m.group(1)}{b + int(m.group(2))}{m.group(3)}", parts)
        first_line = text.count("\n") + 1
        text += parts
        first_part.append(base)
        lines.append((first_line, text.count("\n")))
        base += count
    return Merged(text + pieces[0][2], tuple(first_part), tuple(lines))


def _merged_batches(jobs) -> dict:
    """check job -> (the report job of its merged unit, its index there), for the check jobs of
    each merge_key in batches of at most MERGED_AT_MOST (the same batches in every worker: the
    jobs sorted by their source)."""
    groups: dict = {}
    for job in sorted(set(jobs), key=lambda j: j.source):
        key = merge_key(job.source)
        if job.kind == "check" and key is not None:
            groups.setdefault((key, job.flags), []).append(job)
    batches = {}
    for (_, flags), members in groups.items():
        if len(members) < 2:
            continue
        count = -(-len(members) // MERGED_AT_MOST)
        for b in range(count):
            batch = members[b::count]
            merged = merged_source([j.source for j in batch])
            for index, job in enumerate(batch):
                batches[job] = (Job("report", merged.source, flags), index, merged)
    return batches


# A diagnostic of the compiled file itself (_report names it k.cu), and a ptxas report's kernel.
_DIAGNOSTIC = re.compile(r"^.*\bk\.cu\((\d+)\): (warning|error) #?\w*")
_OTHER_FILE_DIAGNOSTIC = re.compile(r"^\S.*\(\d+\): (warning|error)")
_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_MANGLED_PART = re.compile(r"(?<!\d)(\d+)kgen_part")


def _parts_named(mangled: str) -> list[int]:
    """The GEMM parts whose namespace a mangled name names (`10kgen_part0`: the length first, as
    the next name may begin with digits: `N10kgen_part08kgen_cfg...`)."""
    out = []
    for m in _MANGLED_PART.finditer(mangled):
        name = mangled[m.end(1):m.end(1) + int(m.group(1))]
        if name[9:].isdigit():
            out.append(int(name[9:]))
    return out


def _own_report(stderr: str, merged: Merged, index: int) -> str | None:
    """The merged unit's report as a check of source `index` reads it: its own kernels and
    diagnostics and the library's (the kernels of no part, the lines before the first part), no
    other source's. None where an unread value (#177) is on the library's lines: a template
    there warns once any source instantiates it, and which ones do only this source alone can
    say. (The library's other warnings, which no test reads, are every source's.)"""
    first_of_parts = merged.lines[0][0]
    lo, hi = merged.lines[index]
    parts = range(merged.first_part[index],
                  merged.first_part[index + 1] if index + 1 < len(merged.first_part) else 1 << 30)
    out, keep = [], True
    for line in stderr.splitlines():
        diagnostic, entry = _DIAGNOSTIC.match(line), _ENTRY.search(line)
        if diagnostic:
            at = int(diagnostic.group(1))
            if at < first_of_parts and "#177-D" in line:
                return None
            keep = at < first_of_parts or lo <= at <= hi
        elif _OTHER_FILE_DIAGNOSTIC.match(line):
            keep = True
        elif entry:
            keep = all(k in parts for k in _parts_named(entry.group(1)))
        elif not line.strip() or line.startswith("Remark"):
            keep = True
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


_JOBS: dict = {}
_BATCHES: dict = {}
_JOBS_LOCK = threading.Lock()
# One nvcc is one core: each worker keeps as many jobs going as there are cores, and the run as
# a whole runs no more nvcc at once than that (_core_slot): more only slows each (on the 2-core
# CI machine two side by side take 1.2x the CPU time of one alone, four 1.35x).
CORES = os.cpu_count() or 2
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=CORES)


def prefetch(jobs) -> None:
    """Starts the jobs not started yet, the longest first: check jobs as their merged units."""
    with _JOBS_LOCK:
        _BATCHES.update(_merged_batches(jobs))
        runs = {_BATCHES[j][0] if j in _BATCHES else _alone(j) for j in jobs}
        for job in sorted(runs - set(_JOBS), key=Job.cost, reverse=True):
            _JOBS[job] = _POOL.submit(_run_once, job)


def _alone(job: Job) -> Job:
    """The job that compiles a check's source by itself (a report)."""
    return job._replace(kind="report") if job.kind == "check" else job


def result(job: Job):
    """The job's result: a report's or a check's (returncode, stderr); a program's (build
    returncode, build stderr, run returncode, run stdout, run stderr). A job still waiting in the
    pool's queue runs here at once rather than after the jobs queued before it."""
    if job.kind == "check":
        batch = _BATCHES.get(job)
        if batch is not None:
            report, index, merged = batch
            returncode, stderr = _result(report)
            own = _own_report(stderr, merged, index) if returncode == 0 and not spills(stderr) else None
            if own is not None:
                return returncode, own
        return _result(_alone(job))
    return _result(job)


def _result(job: Job):
    with _JOBS_LOCK:
        future = _JOBS.get(job)
        here = future is None or future.cancel()
        if here:
            future = _JOBS[job] = concurrent.futures.Future()
    if here:
        try:
            future.set_result(_run_once(job))
        except BaseException as e:  # noqa: BLE001 - the waiting test reports it
            future.set_exception(e)
    return future.result()


def _run_once(job: Job):
    """nvcc's result, once per run for a job: left in the run's folder (conftest.NVCC_RESULTS),
    and a worker that wants a job another worker is running waits for it (a lock per job) and
    reads its result."""
    run = _report if job.kind == "report" else _program
    folder = os.environ.get("KGEN_TEST_NVCC_RESULTS")
    if not folder:
        return run(job.source, job.flags)
    key = hashlib.sha256("\0".join([job.kind, job.source, *job.flags]).encode()).hexdigest()[:32]
    with open(Path(folder) / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = Path(folder) / f"{key}.json"
        if done.exists():
            return tuple(json.loads(done.read_text()))
        with _core_slot(Path(folder)):
            result = run(job.source, job.flags)
        done.write_text(json.dumps(result))
        return result


@contextlib.contextmanager
def _core_slot(folder: Path):
    """One of the run's CORES slots (a lock file each in the run's folder), held while nvcc runs.
    Taken inside a job's lock and given back before it: a slot's holder waits for nothing."""
    while True:
        for k in range(CORES):
            with open(folder / f"core{k}.lock", "w") as slot:
                try:
                    fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield
                return
        time.sleep(0.05)


def _spawned(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run of cmd, its output captured; started again once where the start itself
    failed (an OSError from the spawn, as a CI run met once: "[Errno 14] Bad address" for nvcc,
    failing every test that shared the job). What nvcc says and returns is never retried."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError:
        time.sleep(1.0)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _report(source: str, flags) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(source)
        try:
            proc = _spawned([NVCC, *COMMON, "-fatbin", *flags, str(cu), "-o", str(Path(tmp) / "k.fatbin")],
                            timeout=900)
        except subprocess.TimeoutExpired:
            return -1, "nvcc took more than 900 s"
    return proc.returncode, proc.stderr


# A program's host code (a main and the C entry points it calls) at -O0: what it prints does not
# depend on g++'s optimizer, which takes about twice as long at -O3 (0.8 s against 0.45 s a
# program: ~10 s of the tier's CPU over its 28 programs). nvcc's -O is the host code's level
# alone: the device code is optimized (and its ptxas report the same) either way.
PROGRAM_COMMON = tuple("-O0" if f == "-O3" else f for f in COMMON)


def _program(source: str, flags) -> tuple[int, str, int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(source)
        build = _spawned([NVCC, *PROGRAM_COMMON, *flags, str(cu), "-o", str(Path(tmp) / "k")], timeout=900)
        if build.returncode != 0:
            return build.returncode, build.stderr, -1, "", ""
        run = subprocess.run([str(Path(tmp) / "k")], capture_output=True, text=True, timeout=60)
    return build.returncode, build.stderr, run.returncode, run.stdout, run.stderr
