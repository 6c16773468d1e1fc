"""nvcc compile-only of the kernel translation unit of every GEMM family and math mode, for
sm_80 and sm_90a, with the ptxas resource report: a spill or a compile error fails the test.
(The torch binding needs torch's CUDA headers and is compiled on the GPU machine only.)"""

import re
import shutil
import subprocess

import pytest

from kgen import generator
from kgen.search import enumerate_specs

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
TARGETS = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]


def representative_specs():
    """Per problem, the first tile of each (family, math, fusion) in the search space at
    KernelBench's shape: every distinct kernel instantiation a search can emit."""
    seen, out = set(), []
    for problem in ("gemm_scale_bn", "gemm_bn_scale_softmax"):
        for s in enumerate_specs(problem, 1024, 8192, 8192):
            k = (problem, s.family, s.math, s.fusion)
            if k not in seen:
                seen.add(k)
                out.append(s)
    return out


def compile_report(source: str, tmp_path) -> str:
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-c", "-Xptxas", "-v", *TARGETS, str(cu),
                           "-o", str(tmp_path / "k.o")], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stderr


def spills(report: str) -> list[str]:
    """Kernels whose ptxas report shows spill stores or loads."""
    bad, kernel = [], None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(\w+)'", line)
        if m:
            kernel = f"{m.group(1)} ({m.group(2)})"
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and (int(m.group(1)) or int(m.group(2))):
            bad.append(f"{kernel}: {line.strip()}")
    return bad


@pytest.mark.parametrize("spec", representative_specs(), ids=lambda s: s.name())
def test_kernels_compile_without_spills(spec, tmp_path):
    report = compile_report(generator.render_cuda_source(spec), tmp_path)
    assert "Compiling entry function" in report
    assert spills(report) == [], "\n".join(spills(report))


def test_spill_parser_catches_spills():
    report = ("ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'\n"
              "ptxas info    : Function properties for _Z3fooPf\n"
              "    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n")
    assert spills(report) == ["_Z3fooPf (sm_90a): 24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads"]
