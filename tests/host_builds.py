"""The g++ builds of the tests that run kgen's kernel code on the host with CUDA emulated
(test_backward_host, test_constant_host): the C++ standard headers they
include are precompiled once per run, into the run's folder (conftest.NVCC_RESULTS), and every
build includes that first: parsing them was ~0.5 s of a build's ~0.85 s. g++ uses a precompiled
header only where it was made with the build's own options (else it reads the headers as
usual), so a build's result never depends on it."""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

GXX = shutil.which("g++")
FLAGS = ("-std=c++20", "-O1", "-pthread")
STD_HEADERS = ("barrier", "cmath", "cstddef", "cstdio", "cstring", "thread", "vector")


def _precompiled() -> list[str]:
    """-include of the precompiled standard headers (made here once per run), or nothing
    outside a test run's folder or where g++ cannot make it."""
    folder = os.environ.get("KGEN_TEST_NVCC_RESULTS")
    if not folder or GXX is None:
        return []
    header = Path(folder) / "kgen_std.h"
    with open(Path(folder) / "kgen_std.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        gch = header.with_suffix(".h.gch")
        if not gch.exists() and not (Path(folder) / "kgen_std.failed").exists():
            header.write_text("".join(f"#include <{h}>\n" for h in STD_HEADERS))
            made = subprocess.run([GXX, *FLAGS, "-x", "c++-header", str(header), "-o", str(gch)],
                                  capture_output=True, text=True, timeout=120)
            if made.returncode != 0:
                (Path(folder) / "kgen_std.failed").write_text(made.stderr)
    return ["-include", str(header)] if gch.exists() else []


def build(source: Path, exe: Path, extra=()) -> subprocess.CompletedProcess:
    """g++ FLAGS (with `extra`) of `source` into `exe`."""
    return subprocess.run([GXX, *FLAGS, *extra, *_precompiled(), str(source), "-o", str(exe)],
                          capture_output=True, text=True, timeout=120)
