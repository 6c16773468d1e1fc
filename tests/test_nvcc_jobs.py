"""tests/nvcc_jobs.py's check jobs: emitted extensions compiled a few to a translation unit, each
test still told its own source's errors, spills and unread values."""

import re
import subprocess

import pytest

import nvcc_jobs
from kgen.codegen import generator
from kgen.tune.search import enumerate_specs
from nvcc_jobs import PTX90A, SM90A, check_job, merged_source, program_job, spills
from test_compile import SPILLING_KERNEL

# A stand-in for an emitted extension's source (kgen/codegen/templates/kernel.cu.j2's layout): the
# library, one GEMM part's namespace and entry point, the end of the hidden region.
EXTENSION = """// kgen test: the extension of {name}
#pragma GCC visibility push(hidden)
#define KGEN_EXPORT extern "C" __attribute__((visibility("default")))
__device__ float kgen_library_scale(float v) {{ return 2.f * v; }}
// ---- GEMM part 0 of 1: this module and variant ----
namespace kgen_part0 {{
{body}
}}  // namespace kgen_part0
KGEN_EXPORT int kgen_value_0() {{ return {value}; }}
#pragma GCC visibility pop
"""
CLEAN = """__global__ void scaled(const float* x, float* y) {
  y[threadIdx.x] = kgen_library_scale(x[threadIdx.x]);
}"""
UNREAD = """__global__ void unread(const float* x, float* y) {
  float never_read = x[1];
  y[threadIdx.x] = x[threadIdx.x];
}"""
# tests/test_compile.py's planted spill, as a part's kernel
SPILLING = SPILLING_KERNEL.replace("planted_spill", "spilling")
MAIN = """#include <cstdio>
int main() { std::printf("%d %d %d\\n", kgen_value_0(), kgen_value_1(), kgen_value_2()); }
"""


def extension(name: str, body: str, value: int = 0) -> str:
    return EXTENSION.format(name=name, body=body, value=value)


def test_merged_source_numbers_the_parts_one_after_the_other():
    """The parts' namespaces and entry points renumbered from the first part of each source on
    (a chain's two parts stay two), the library once; and each source's lines are where its
    parts are."""
    chain = extension("chain", CLEAN).replace("part 0 of 1", "part 0 of 2") + \
        "namespace kgen_part1 {}\nKGEN_EXPORT int kgen_value_1() { return 1; }\n"
    chain = chain.replace("#pragma GCC visibility pop\n", "") + "#pragma GCC visibility pop\n"
    sources = [extension("a", CLEAN, 7), chain, extension("b", UNREAD, 9)]
    merged = merged_source(sources)
    assert merged.first_part == (0, 1, 3)
    assert re.findall(r"namespace (kgen_part\d+) \{", merged.source) == [f"kgen_part{k}" for k in range(4)]
    assert re.findall(r"KGEN_EXPORT int (kgen_value_\d+)", merged.source) == [f"kgen_value_{k}" for k in range(4)]
    assert merged.source.count("kgen_library_scale(float v)") == 1
    lines = merged.source.splitlines()
    for (first, last), part, source in zip(merged.lines, merged.first_part, sources):
        own = "\n".join(lines[first - 1:last])
        assert lines[first - 1].startswith("// ---- GEMM part 0 of ") and f"namespace kgen_part{part} " in own
        assert own.count("KGEN_EXPORT") == source.count("KGEN_EXPORT int")
    assert "never_read" in "\n".join(lines[merged.lines[2][0] - 1:merged.lines[2][1]])
    assert merged.lines[0][0] > merged.source[:merged.source.index("// ---- GEMM part")].count("\n")
    assert nvcc_jobs.merge_key(sources[0]) == nvcc_jobs.merge_key(sources[2])
    assert nvcc_jobs.merge_key(extension("c", CLEAN).replace("2.f * v", "3.f * v")) != nvcc_jobs.merge_key(sources[0])
    assert nvcc_jobs.merge_key(SPILLING) is None


@pytest.mark.skipif(nvcc_jobs.NVCC is None, reason="nvcc not on PATH")
def test_a_check_is_told_its_own_warnings_and_spills_only():
    """Three checks in one merged unit: the one with an unread value is told its #177 warning,
    the others are not; with a spilling one among them, the unit spills, and each is compiled
    alone: the spilling one is told its spill, the others nothing."""
    clean, unread = check_job(extension("clean", CLEAN), (SM90A,)), check_job(extension("unread", UNREAD), (SM90A,))
    other = check_job(extension("other", CLEAN.replace("scaled", "scaled_again")), (SM90A,))
    nvcc_jobs.prefetch([clean, unread, other])
    assert nvcc_jobs._BATCHES[clean][0] == nvcc_jobs._BATCHES[unread][0] == nvcc_jobs._BATCHES[other][0]
    for job in (clean, unread, other):
        returncode, report = nvcc_jobs.result(job)
        assert returncode == 0 and spills(report) == []
        assert ("#177-D" in report) == (job is unread), report
        assert "never_read" not in report or job is unread

    spilling = check_job(extension("spilling", SPILLING), (SM90A,))
    clean2 = check_job(extension("clean2", CLEAN.replace("scaled", "scaled2")), (SM90A,))
    nvcc_jobs.prefetch([spilling, clean2])
    merged_report = nvcc_jobs.result(nvcc_jobs._BATCHES[clean2][0])[1]
    assert spills(merged_report) != []
    assert [line.split(":")[0] for line in spills(nvcc_jobs.result(spilling)[1])] == [
        "_ZN10kgen_part08spillingEPKfPfi (sm_90a)"]
    assert spills(nvcc_jobs.result(clean2)[1]) == []


@pytest.mark.skipif(nvcc_jobs.NVCC is None, reason="nvcc not on PATH")
def test_a_merged_program_calls_each_sources_entry_points():
    """A program of three sources' parts: each entry point answers as its own source's did."""
    sources = [extension(name, CLEAN.replace("scaled", f"scaled_{name}"), value)
               for name, value in (("a", 5), ("b", 6), ("c", 7))]
    merged = merged_source(sources)
    job = program_job(merged.source + MAIN, (PTX90A, "-Xcicc", "-O0"))
    build_returncode, build_stderr, returncode, stdout, _ = nvcc_jobs.result(job)
    assert build_returncode == 0, build_stderr[-2000:]
    assert returncode == 0 and stdout.split() == ["5", "6", "7"]


@pytest.mark.skipif(nvcc_jobs.NVCC is None, reason="nvcc not on PATH")
def test_merged_emitted_sources_compile_to_the_kernels_of_each(tmp_path):
    """Two emitted extensions of one kernel library, merged: the unit's kernels are each source's
    own, the part's namespace renumbered (unoptimized PTX: every kernel and its name, not their
    machine code)."""
    specs = [s for problem in ("gemm_scale_bn", "gemm_bn_scale_softmax")
             for s in enumerate_specs(problem, 1024, 8192, 8192) if s.family == "simt" and s.fusion == 2][:2]
    sources = [generator.render_cuda_source(s) for s in specs]
    assert nvcc_jobs.merge_key(sources[0]) == nvcc_jobs.merge_key(sources[1])

    def kernels(source: str, tmp=tmp_path) -> set:
        (tmp / "k.cu").write_text(source)
        proc = subprocess.run([nvcc_jobs.NVCC, *nvcc_jobs.COMMON, "-Xcicc", "-O0", "-ptx", PTX90A, str(tmp / "k.cu"),
                               "-o", str(tmp / "k.ptx")], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return set(re.findall(r"\.entry (\w+)", (tmp / "k.ptx").read_text()))

    alone = [kernels(s) for s in sources]
    together = kernels(merged_source(sources).source)
    renamed = {k.replace("kgen_part0", "kgen_part1") for k in alone[1]}
    assert len(alone[0]) > 5 and together == alone[0] | renamed


@pytest.mark.skipif(nvcc_jobs.NVCC is None, reason="nvcc not on PATH")
def test_an_unread_value_in_a_library_template_is_told_to_the_sources_that_instantiate_it():
    """A template of the library that leaves a value unread warns (#177) once any source of the
    unit instantiates it, on the library's line: each source is then compiled alone, and only the
    one that instantiates it is told. A source is told its own kernels, not another's."""
    library = ("template <int N> __device__ float kgen_unread_in_template(float v) {\n"
               "  float never_read = v * N;\n  return v;\n}\n")

    def with_template(name, body):
        return extension(name, body).replace("// ---- GEMM part 0", library + "// ---- GEMM part 0")

    plain = check_job(with_template("plain", CLEAN.replace("scaled", "plain_kernel")), (SM90A,))
    user = check_job(with_template("user", """__global__ void user_kernel(const float* x, float* y) {
  y[threadIdx.x] = kgen_unread_in_template<3>(x[threadIdx.x]);
}"""), (SM90A,))
    nvcc_jobs.prefetch([plain, user])
    assert nvcc_jobs._BATCHES[plain][0] == nvcc_jobs._BATCHES[user][0]
    merged_report = nvcc_jobs.result(nvcc_jobs._BATCHES[plain][0])[1]
    assert "#177-D" in merged_report and "plain_kernel" in merged_report
    plain_report, user_report = nvcc_jobs.result(plain)[1], nvcc_jobs.result(user)[1]
    assert "#177-D" not in plain_report and "#177-D" in user_report
    assert "user_kernel" not in plain_report and "plain_kernel" not in user_report

    a = check_job(extension("a", CLEAN.replace("scaled", "kernel_of_a")), (SM90A,))
    b = check_job(extension("b", CLEAN.replace("scaled", "kernel_of_b")), (SM90A,))
    nvcc_jobs.prefetch([a, b])
    report_a = nvcc_jobs.result(a)[1]
    assert "kernel_of_a" in report_a and "kernel_of_b" not in report_a
