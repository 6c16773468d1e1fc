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


def program_job(source: str, flags) -> Job:
    return Job("program", source, tuple(flags))


def host_hidden_lines(source: str) -> list[str]:
    """Lines of `source` that test __CUDA_ARCH__ other than ALLOWED_ARCH_TEST: host code behind
    them would be compiled by g++ only, which a report job does not run."""
    return [line for line in source.splitlines() if HOST_HIDDEN.search(line) and line.strip() != ALLOWED_ARCH_TEST]


_JOBS: dict = {}
_JOBS_LOCK = threading.Lock()
# One nvcc is one core: each worker keeps as many jobs going as there are cores, and the run as
# a whole runs no more nvcc at once than that (_core_slot): more only slows each (on the 2-core
# CI machine two side by side take 1.2x the CPU time of one alone, four 1.35x).
CORES = os.cpu_count() or 2
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=CORES)


def prefetch(jobs) -> None:
    """Starts the jobs not started yet, the longest first."""
    with _JOBS_LOCK:
        for job in sorted(set(jobs) - set(_JOBS), key=Job.cost, reverse=True):
            _JOBS[job] = _POOL.submit(_run_once, job)


def result(job: Job):
    """The job's result: a report's (returncode, stderr); a program's (build returncode, build
    stderr, run returncode, run stdout, run stderr). A job still waiting in the pool's queue runs
    here at once rather than after the jobs queued before it."""
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


def _report(source: str, flags) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "k.cu"
        cu.write_text(source)
        proc = subprocess.run([NVCC, *COMMON, "-fatbin", *flags, str(cu), "-o", str(Path(tmp) / "k.fatbin")],
                              capture_output=True, text=True, timeout=900)
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
        build = subprocess.run([NVCC, *PROGRAM_COMMON, *flags, str(cu), "-o", str(Path(tmp) / "k")],
                               capture_output=True, text=True, timeout=900)
        if build.returncode != 0:
            return build.returncode, build.stderr, -1, "", ""
        run = subprocess.run([str(Path(tmp) / "k")], capture_output=True, text=True, timeout=60)
    return build.returncode, build.stderr, run.returncode, run.stdout, run.stderr
