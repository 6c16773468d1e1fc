"""nvcc of the whole extension source (kernels and C entry points; there is no torch binding to
compile) of every GEMM family and math mode, for sm_80 and sm_90a (the wgmma family: sm_90a
only), up to the fat binary (tests/nvcc_jobs.py: a report job), with the ptxas resource report:
a spill or a compile error fails the test.
The cuBLAS-backed variants need cuBLAS's header, which a bare CUDA toolkit may lack; where it
does, they are compiled on the GPU machine only (the GPU tier builds them)."""

import dataclasses
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kgen.codegen import generator
from kgen.tune.search import enumerate_specs
from kgen.tune.spec import (FP16X3_TF32X3_STAGES, FP16X3_W_IN_REGISTERS_MAX_ROWS, ROUND16_TF32_STAGES, WGMMA_FLUSH_KTILES, Spec, Tile,
                            gemm_smem_bytes, wgmma_fallback_smem_bytes, wgmma_smem_bytes, wgmma_threads)

import nvcc_jobs
from conftest import module_source, nvcc_prefetch
from nvcc_jobs import KNOWN_SPILLS, NVCC, PTX90A, SM80, SM90A, check_job, program_job, report_job, spills  # noqa: F401


def _has_cublas_header() -> bool:
    if NVCC is None:
        return False
    probe = subprocess.run([NVCC, "-E", "-x", "cu", "-"], input="#include <cublas_v2.h>\n",
                           capture_output=True, text=True, timeout=120)
    return probe.returncode == 0


HAS_CUBLAS = _has_cublas_header()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
ROOT = Path(__file__).resolve().parent.parent


def representative_specs():
    """Per problem, the first tile of each (family, math, fusion) in the search space at
    KernelBench's shape: every distinct kernel instantiation a search can emit. The cuBLAS
    variants' math is the compute type of the host's cuBLAS call alone (their kernels are the
    same: test_cublas_maths_differ_in_the_host_call_only), so one of them stands for all."""
    seen, out = set(), []
    for problem in ("gemm_scale_bn", "gemm_bn_scale_softmax"):
        for s in enumerate_specs(problem, 1024, 8192, 8192):
            k = (problem, s.family, "" if s.family == "cublas" else s.math, s.fusion)
            # fp16x3's kernels differ from tf32x3's in the GEMM's mainloop alone (its epilogue,
            # statistics and backward are the same code): the softmax problem's with the fused
            # statistics (the most registers at the epilogue) covers them.
            if s.math == "fp16x3" and (problem != "gemm_bn_scale_softmax" or s.fusion != 2):
                continue
            # wgmma fp16's kernels are wgmma bf16's on the other 16-bit type (the same template):
            # the softmax problem's with the fused statistics stands for them.
            if s.family == "wgmma" and s.math == "fp16" and (problem != "gemm_bn_scale_softmax" or s.fusion != 2):
                continue
            if k not in seen:
                seen.add(k)
                out.append(s)
    return out


def compile_report(source: str, tmp_path, targets=(SM80, SM90A)) -> str:
    """nvcc's stderr (the ptxas report) for `source` (tests/nvcc_jobs.py: a report job); a
    compile error fails the test."""
    returncode, stderr = _compile(source, targets)
    assert returncode == 0, stderr[-4000:]
    return stderr


def compile_check(source: str, targets=(SM80, SM90A)) -> str:
    """nvcc's report for `source` as a check job reads it (tests/nvcc_jobs.py: possibly compiled
    beside other sources; for its errors, spills and #177 warnings, not the kernels it names); a
    compile error fails the test."""
    assert nvcc_jobs.host_hidden_lines(source) == [], nvcc_jobs.host_hidden_lines(source)
    returncode, stderr = nvcc_jobs.result(check_job(source, targets))
    assert returncode == 0, stderr[-4000:]
    return stderr


def _compile(source: str, targets) -> tuple[int, str]:
    # A report job does not run g++ on the host code: none may hide from the device pass.
    assert nvcc_jobs.host_hidden_lines(source) == [], nvcc_jobs.host_hidden_lines(source)
    return nvcc_jobs.result(report_job(source, targets))


def test_cublas_maths_differ_in_the_host_call_only():
    """The CUDA sources of a problem's cuBLAS variants differ in their first comment line and in
    KGEN_CUBLAS_COMPUTE (the host's cublasGemmEx compute type) alone: one spill test covers them."""
    for problem in ("gemm_scale_bn", "gemm_bn_scale_softmax"):
        variants = [s for s in enumerate_specs(problem, 1024, 8192, 8192) if s.family == "cublas"]
        assert len({s.math for s in variants}) == 3
        bodies = {tuple(line for line in cuda_source(s).splitlines()
                        if not line.startswith(("// kgen ", "#define KGEN_CUBLAS_COMPUTE ")))
                  for s in variants}
        assert len(bodies) == 1
        # (the macro's uses: comments, the #ifdef around the host's GEMM call, the call's argument)
        uses = [line.strip() for line in next(iter(bodies)) if "KGEN_CUBLAS_COMPUTE" in line]
        assert all(u.startswith(("//", "#ifdef KGEN_CUBLAS_COMPUTE", "CUDA_R_32F, K, &beta")) for u in uses), uses
    assert sum(s.family == "cublas" for s in SPILL_TEST_SPECS) == 2


# A tile the spec's rule admits whose 4-column groups do not divide among its threads alike (96
# columns over one warp: 24 groups for 32 threads), so that a thread's columns change from row to
# row: the tile's stores take their general loop there (common.cuh, tile_store), not the one where
# each thread keeps its columns (and their operands) across rows. The search space has no such
# tile; `kgen generate --tile` makes one.
ODD_STORE_TILE_SPEC = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32", backend="kgen",
                              tile=Tile(16, 96, 32, 16, 96, stages=3))


def odd_store_tile_jobs(params) -> list:
    return [check_job(cuda_source(ODD_STORE_TILE_SPEC), (SM90A,))]


@nvcc_prefetch(odd_store_tile_jobs)
def test_a_tile_whose_column_groups_do_not_divide_among_its_threads_compiles():
    assert ODD_STORE_TILE_SPEC.tile.threads % (ODD_STORE_TILE_SPEC.tile.bn // 4) != 0
    report = compile_check(cuda_source(ODD_STORE_TILE_SPEC), (SM90A,))
    assert spills(report) == [], "\n".join(spills(report))


def spill_test_targets(spec):
    return (SM90A,) if spec.family == "wgmma" else (SM80, SM90A)


SPILL_TEST_SPECS = representative_specs()


@functools.lru_cache(maxsize=None)
def cuda_source(spec) -> str:
    return generator.render_cuda_source(spec)


def spill_test_jobs(params) -> list:
    spec = params["spec"]
    if spec.family == "cublas" and not HAS_CUBLAS:
        return []
    return [check_job(cuda_source(spec), spill_test_targets(spec))]


@nvcc_prefetch(spill_test_jobs)
@pytest.mark.parametrize("spec", SPILL_TEST_SPECS, ids=lambda s: s.name())
def test_kernels_compile_without_spills(spec, tmp_path):
    if spec.family == "cublas" and not HAS_CUBLAS:
        pytest.skip("this CUDA toolkit has no cublas_v2.h; the GPU tier builds the cuBLAS variants")
    report = compile_check(cuda_source(spec), spill_test_targets(spec))
    assert re.search(r"Compiling entry function '\w*\d+kgen_part\d+", report), "no kernel of the module's own"
    assert spills(report) == [], "\n".join(spills(report))
    # A value the emitted code declares and never reads (nvcc's warning #177; the backward row
    # kernel's reverse pass recomputes every forward value: lower/backward.drop_unused_values)
    unread = [line for line in report.splitlines() if "#177-D" in line]
    assert unread == [], "\n".join(unread)


# The declarations of cuBLAS's that kernels/cublas_gemm.cuh uses, where this toolkit has no
# cublas_v2.h: enough for a compile-only check (nothing is linked or run).
CUBLAS_DECLARATIONS = """#pragma once
#include <library_types.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16BF = 75, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
const char* cublasGetStatusString(cublasStatus_t);
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
"""


def test_the_cublas_fp32_file_sums_rows_in_eagers_order(tmp_path):
    """The cuBLAS fp32 variant of a module with a row sum (its GEMM is eager's own call) sums in
    eager's order (kernels/eager_sum.cuh; bit for bit torch.sum's on the GPU:
    tests/test_eager_sum_gpu.py), compiled here without spills; the TF32 variant, whose GEMM
    is not eager's, keeps kgen's order and does not carry the file."""
    specs = {s.math: s for s in enumerate_specs(str(ROOT / "tests" / "refs" / "gemm_sigmoid_sum.py"), 1024, 8192, 8192)
             if s.family == "cublas"}
    source = cuda_source(specs["fp32_simt"])
    assert "kgen::eager_row_sum(static_cast<int>(gridDim.x), N, [&](int n) -> float {" in source
    assert "eager_row_sum" not in cuda_source(specs["tf32"])
    if not HAS_CUBLAS:
        (tmp_path / "cublas_v2.h").write_text(CUBLAS_DECLARATIONS)
        source = source.replace("#include <cublas_v2.h>", f'#include "{tmp_path / "cublas_v2.h"}"')
    report = compile_report(source, tmp_path, (SM90A,))
    assert "row_kernel" in report
    assert spills(report) == [], "\n".join(spills(report))


def half_build_targets(operand: str) -> tuple:
    """The nvcc flags of a 16-bit build: "OPERAND", "OPERAND autocast" (the build for
    torch.autocast, which rounds no op's result and writes the module's output in fp32), or
    "OPERAND autocast fp32_weight" (that build for an fp32 module: its GEMM reads the fp32 weight)."""
    operand, *autocast = operand.split()
    return (SM90A, f"-DKGEN_OPERAND={operand}", *(("-DKGEN_AUTOCAST", "-DKGEN_FP32_OUTPUT") if autocast else ()),
            *(("-DKGEN_FP32_WEIGHT",) if "fp32_weight" in autocast else ()))


@nvcc_prefetch(lambda p: [report_job(cuda_source(p["spec"]), half_build_targets(p["operand"]))])
@pytest.mark.parametrize("operand", ["__nv_bfloat16", "__half", "__nv_bfloat16 autocast", "__nv_bfloat16 autocast fp32_weight"])
@pytest.mark.parametrize("spec", [s for s in representative_specs()
                                  if generator.half_gemm_type(s) and s.math == "tf32x3" and s.fusion == 2],
                         ids=lambda s: s.name())
def test_half_precision_builds_compile_without_spills(spec, operand, tmp_path):
    """The build a module in bf16 / fp16 gets (the emitted file passes -DKGEN_OPERAND=...): the
    16-bit wgmma GEMM with its epilogues (fusion 2: column statistics from registers, the
    heaviest), no spills. The fp32 GEMM's math mode does not change the 16-bit build. The
    kernels that write the module's output write it in the 16-bit type: the GEMM whose epilogue
    makes it (eval mode: StoringAs) and stage 2's point-wise or row kernel (training mode)."""
    report = compile_report(cuda_source(spec), tmp_path, half_build_targets(operand))
    kernels = re.findall(r"Compiling entry function '(\w+)'", report)
    assert spills(report) == [], "\n".join(spills(report))
    if operand.endswith("fp32_weight"):
        # An fp32 module's build for autocast: the round16 GEMM on x of the 16-bit type (the
        # CTAs of two tiles and of one), no half GEMM and no few-row GEMM of fp32 products.
        assert generator.autocast_gemm_type(spec) is not None
        gemms = [k for k in kernels if "wgmma_round16_kernel" in k]
        assert any("Li2EEE" in k for k in gemms) and any("Li1EEE" in k for k in gemms), gemms
        assert not [k for k in kernels if "wgmma_half_kernel" in k or "SkinnyGemm" in k]
        # (x's pass permutes 16-bit x: to_16bit_kernel<bf16, bf16>, not <bf16, float>)
        passes = [k for k in kernels if "to_16bit_kernel" in k]
        assert passes and all("to_16bit_kernelI13__nv_bfloat16S2_E" in k for k in passes), passes
        return
    assert "wgmma_half_kernel" in report
    if operand.endswith("autocast"):
        return   # (its output fp32: no kernel writes a 16-bit one)
    mangled = {"__nv_bfloat16": "13__nv_bfloat16", "__half": "6__half"}[operand]
    typed = [k for k in kernels if mangled in k and ("pointwise_kernel" in k or "row_kernel" in k)]
    assert typed, "no stage-2 kernel writes the 16-bit output"
    if spec.problem == "gemm_scale_bn":   # eval: the GEMM's epilogue makes the output
        assert any("wgmma_half_kernel" in k and "StoringAs" in k and mangled in k for k in kernels)
    # Its backward's kernels, but no fp32 GEMM: torch's run a 16-bit module's backward GEMMs
    # (entry_backward.cuh, BuildBackwardGemm), so the build compiles none it cannot use.
    assert any("backward_pointwise_kernel" in k for k in kernels)
    assert not [k for k in kernels if "wgmma_ws_kernel" in k or "wgmma_gemm_kernel" in k or "SkinnyGemmIfE" in k]


# A point-wise module with backward kernels: its training forward keeps z in the GEMM's epilogue
# beside the output (KeepingZ: backward.cuh, forward_keeping_z), so its 16-bit build, whose
# backward runs no GEMM of its own, instantiates no GEMM that stores z alone (forward.cuh,
# forward_impl, leaves that path out for such a part: it was ~3 s of the build's nvcc).
KEEP_Z_SPEC = Spec.of(str(ROOT / "tests" / "refs" / "gemm_mul_leakyrelu.py"), 1024, 4096, 4096, math="tf32x3",
                      backend="wgmma", fusion=2, tile=Tile(128, 128, 32, 16, 128, stages=4))


@nvcc_prefetch(lambda p: [report_job(cuda_source(KEEP_Z_SPEC), half_build_targets(p["operand"]))])
@pytest.mark.parametrize("operand", ["__nv_bfloat16", "__half"])
def test_a_pointwise_parts_16_bit_build_keeps_z_in_its_gemms_epilogue(operand, tmp_path):
    report = compile_report(cuda_source(KEEP_Z_SPEC), tmp_path, half_build_targets(operand))
    kernels = re.findall(r"Compiling entry function '(\w+)'", report)
    half = [k for k in kernels if "wgmma_half_kernel" in k]
    skinny = [k for k in kernels if "skinny_kernel" in k]
    assert any("KeepingZ" in k for k in half) and any("KeepingZ" in k for k in skinny), kernels
    assert not [k for k in half + skinny if "StoreEpilogue" in k], kernels


# Modules of tests/refs/ by the way their output is made, and per GEMM part what a 16-bit build
# should say: whether the kernels write the output in the module's dtype (else fp32 and
# converted by ModelNew), and whether S moves out of the output's buffer into the workspace (a
# 16-bit output cannot hold the fp32 S that a stage 2 reads: M x N floats more of it).
OUTPUT_TYPE_CASES = {
    "gemm_swish_scale": [(1, False)],            # point-wise: the GEMM's epilogue writes it
    "matmul_gelu_softmax": [(1, True)],          # a row kernel
    "gemm_bn_gelu_relu": [(1, True)],            # training: stage 2 point-wise; eval: the epilogue
    "gemm_maxpool_sum_scale": [(1, False)],      # an (M,) output: S was in the workspace already
    "gemm_groupnorm_min_bias": [(1, False)],     # a broadcast tail: its kernel writes it
    "gemm_max_sub_gelu": [(0, False)],           # a constant: fp32
    # A chain at fusion 0 (OUTPUT_TYPE_FUSION): the first part's sigmoid in a point-wise kernel
    # of its own, which reads S from the workspace; then an (M,) output.
    "gemm_sigmoid_gemm_lse": [(1, True), (1, False)],
}
CONSTANT_OUTPUT = {"gemm_max_sub_gelu"}
# Fusion 2 (the statistics from the GEMM's registers, the heaviest epilogue) but where named.
OUTPUT_TYPE_FUSION = {"gemm_sigmoid_gemm_lse": 0}
ENTRY_MAIN = r"""
#include <cstdio>
int main() {
  for (int part = 0; part < @PARTS@; ++part) {
    int typed = 0;
    long long floats = 0, backward = -1;
    switch (part) {
@CASES@
    }
    std::printf("%d %lld %lld\n", typed, floats, backward);
  }
}
"""
ENTRY_SHAPE = (257, 528, 296)   # M, N, K


# The output-type builds by name: their flags, and whether their kernels are machine code (with
# ptxas's report: a spill fails the test) or unoptimized PTX (no ptxas, cicc at -O0: a third of
# the build's time; the host code the program runs is compiled as always), for the builds whose
# kernels another build checks for spills (fp16's kernels are bf16's with the other conversions).
OUTPUT_TYPE_BUILDS = {"fp32": ([], True), "bf16": (["-DKGEN_OPERAND=__nv_bfloat16"], True),
                      "fp16": (["-DKGEN_OPERAND=__half"], False),
                      "bf16 fp32 output": (["-DKGEN_OPERAND=__nv_bfloat16", "-DKGEN_FP32_OUTPUT"], False)}


@functools.lru_cache(maxsize=None)
def output_type_source(ref: str) -> str:
    """`ref`'s extension source at ENTRY_SHAPE (wgmma tf32x3)."""
    from kgen.tune.spec import Spec, Tile

    M, N, K = ENTRY_SHAPE
    out = 1536 if ref == "gemm_groupnorm_min_bias" else N   # GroupNorm(512)
    spec = Spec.of(str(ROOT / "tests" / "refs" / f"{ref}.py"), M, K, out, math="tf32x3", backend="wgmma",
                   fusion=OUTPUT_TYPE_FUSION.get(ref, 2), tile=Tile(128, 128, 32, 16, 128, stages=4))
    return generator.render_cuda_source(spec)


def _program_jobs(source: str, parts: int) -> dict:
    """Per build of OUTPUT_TYPE_BUILDS, the program job of an extension source of `parts` GEMM
    parts with a main that prints, per part, kgen_output_is_operand_typed_<part>(),
    kgen_workspace_floats_<part>(M, N, K) and, where the part has backward kernels,
    kgen_backward_floats_<part>(M, N, K, M * N) (else -1) (host code: no GPU needed)."""
    M, N, K = ENTRY_SHAPE

    def backward(k: int) -> str:
        has = f"kgen_backward_floats_{k}(int M" in source
        return f" backward = kgen_backward_floats_{k}({M}, {N}, {K}, {M * N});" if has else ""
    cases = "\n".join(f"      case {k}: typed = kgen_output_is_operand_typed_{k}(); "
                      f"floats = kgen_workspace_floats_{k}({M}, {N}, {K});{backward(k)} break;" for k in range(parts))
    source += ENTRY_MAIN.replace("@PARTS@", str(parts)).replace("@CASES@", cases)
    return {name: program_job(source, ([SM90A] if machine_code else [PTX90A, "-Xcicc", "-O0"]) + flags)
            for name, (flags, machine_code) in OUTPUT_TYPE_BUILDS.items()}


def output_type_jobs(ref: str) -> dict:
    """`ref`'s own program jobs (_program_jobs)."""
    return _program_jobs(output_type_source(ref), len(OUTPUT_TYPE_CASES[ref]))


@functools.lru_cache(maxsize=None)
def merged_output_type_jobs() -> dict:
    """ref -> (the program jobs of one extension of the GEMM parts of every reference of its
    kernel library, the number of its first part there): one build per library rather than per
    reference (tests/nvcc_jobs.py, merged_source; the shared kernels compiled once)."""
    groups: dict = {}
    for ref in sorted(OUTPUT_TYPE_CASES):
        groups.setdefault(nvcc_jobs.merge_key(output_type_source(ref)), []).append(ref)
    out = {}
    for refs in groups.values():
        if len(refs) > 1:
            merged = nvcc_jobs.merged_source([output_type_source(r) for r in refs])
            jobs = _program_jobs(merged.source, sum(len(OUTPUT_TYPE_CASES[r]) for r in refs))
            out.update({r: (jobs, first) for r, first in zip(refs, merged.first_part)})
    return out


def _entry_points_output(job) -> str:
    """stdout of the program job's run; a build error, or a spill where its kernels are machine
    code, fails the test."""
    build_returncode, build_stderr, returncode, stdout, stderr = nvcc_jobs.result(job)
    assert build_returncode == 0, build_stderr[-4000:]
    assert spills(build_stderr) == [], "\n".join(spills(build_stderr))
    assert returncode == 0, stderr
    return stdout


def entry_points_said(ref: str) -> dict:
    """Per build, what `ref`'s parts' entry points say: its lines of the merged program's output
    where that builds, runs and spills nowhere, else of its own program's (whose failure, with
    its own message, fails the test)."""
    parts = len(OUTPUT_TYPE_CASES[ref])
    merged_jobs, first = merged_output_type_jobs().get(ref, ({}, 0))
    said = {}
    for name, job in output_type_jobs(ref).items():
        lines = None
        if name in merged_jobs:
            build_returncode, build_stderr, returncode, stdout, _ = nvcc_jobs.result(merged_jobs[name])
            if build_returncode == 0 and returncode == 0 and not spills(build_stderr):
                lines = stdout.splitlines()[first:first + parts]
        if lines is None:
            lines = _entry_points_output(job).splitlines()
            # Its own passes: the merged one failed for another reference (whose test says why).
            assert name not in merged_jobs, f"{name}: the merged program failed, {ref}'s own did not"
        said[name] = [tuple(int(v) for v in line.split()) for line in lines]
    return said


@nvcc_prefetch(lambda p: list(merged_output_type_jobs().get(p["ref"], (output_type_jobs(p["ref"]), 0))[0].values()))
@pytest.mark.parametrize("ref", sorted(OUTPUT_TYPE_CASES))
def test_the_output_type_and_workspace_each_build_reports(ref):
    """What kgen_output_is_operand_typed_<part>() tells ModelNew (which dtype to allocate the
    output in) for the fp32 build, the 16-bit builds and a 16-bit build with KGEN_FP32_OUTPUT
    (the old path: every output fp32), and the workspace each needs: the fp32 build's is the
    old path's (its output holds S) and x's small part (its tf32x3 GEMM on a square tile reads x
    as the shared-memory operand: M x K floats after the rest, which entry.cuh rounds up to 4),
    a 16-bit build's has room for S where the output cannot hold it."""
    M, N, K = ENTRY_SHAPE
    parts = OUTPUT_TYPE_CASES[ref]
    said = entry_points_said(ref)
    assert [typed for typed, _, _ in said["fp32"]] == [1] * len(parts)
    assert [typed for typed, _, _ in said["bf16 fp32 output"]] == [0] * len(parts)
    x_small = [full - old for (_, full, _), (_, old, _) in zip(said["fp32"], said["bf16 fp32 output"])]
    if ref in CONSTANT_OUTPUT:
        assert x_small == [0] * len(parts)   # no GEMM runs
    else:
        assert all(M * K <= floats < M * K + 4 for floats in x_small), x_small
    for dtype in ("bf16", "fp16"):
        assert [typed for typed, _, _ in said[dtype]] == [typed for typed, _ in parts], dtype
        moved = [half - full for (_, half, _), (_, full, _) in zip(said[dtype], said["bf16 fp32 output"])]
        assert moved == [M * N if s_moves else 0 for _, s_moves in parts], dtype


@nvcc_prefetch(lambda p: list(merged_output_type_jobs().get(p["ref"], (output_type_jobs(p["ref"]), 0))[0].values()))
@pytest.mark.parametrize("ref", sorted(OUTPUT_TYPE_CASES))
def test_a_16_bit_backward_asks_no_workspace_for_gemms(ref):
    """A 16-bit build's backward runs no GEMM of its own (torch's run dx and dW): the workspace
    its kgen_backward_floats asks for has no room for the GEMMs' transposes (w^T, dz^T, x^T),
    which the fp32 build's holds, nor (but for a row kernel before BatchNorm) for an fp32 dz: at
    most an fp32 copy of g (a broadcast tail's) and the column sums more. (The transposes were 320
    MB at 1024 x 8192 x 8192, unused: docs/perf.md, session 40.)"""
    M, N, K = ENTRY_SHAPE
    said = entry_points_said(ref)
    transposes = K * N + N * M + K * M
    checked = 0
    for (_, _, full), (_, _, half), (_, _, fp16) in zip(said["fp32"], said["bf16"], said["fp16"]):
        assert (full < 0) == (half < 0) == (fp16 < 0)   # the same parts have a backward
        if full < 0:
            continue
        assert half == fp16
        # (fp32: transposes + dz; bf16 at most: dz + g's copy + 18 rows of column sums, each
        # segment rounded up to 32 floats)
        assert full - half >= transposes - M * N - 18 * N - 6 * 32, (full, half)
        checked += 1
    assert checked or ref in CONSTANT_OUTPUT


# A kernel that needs more registers than its launch bounds leave it (256 threads x 2 blocks:
# at most 128 each): ptxas spills its accumulators.
SPILLING_KERNEL = r"""
__global__ void __launch_bounds__(256, 2) planted_spill(const float* x, float* y, int n) {
  float acc[160];
#pragma unroll
  for (int i = 0; i < 160; ++i) acc[i] = x[i * n + threadIdx.x];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < 160; ++i) acc[i] = acc[i] * acc[(i + 1) % 160] + x[k];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 160; ++i) s += acc[i];
  y[threadIdx.x] = s;
}
"""


def test_a_report_names_a_planted_spill():
    """A report job (-fatbin) still runs ptxas with its report: a kernel that spills is named."""
    report = compile_report(SPILLING_KERNEL, None, (SM90A,))
    assert [line.split(":")[0] for line in spills(report)] == ["_Z13planted_spillPKfPfi (sm_90a)"]


def test_a_host_code_error_fails_a_report():
    """A report job does not run g++, but the device pass's front end checks the host code: an
    error in a C entry point of an extension fails the compile, naming the line."""
    source = cuda_source(SPILL_TEST_SPECS[0])
    call = "return kgen_part0::kgen::workspace_floats(M, N, K);"
    assert call in source
    returncode, stderr = _compile(source.replace(call, "return kgen_part0::kgen::workspace_floats(M, N, K, 0);"),
                                  (SM90A,))
    assert returncode != 0 and "too many arguments in function call" in stderr, stderr[-4000:]
    assert "workspace_floats(M, N, K, 0)" in stderr


def test_host_code_behind_cuda_arch_is_refused():
    """Host code behind a __CUDA_ARCH__ test would be compiled by g++ alone, which a report job
    does not run: compile_report refuses such a source (the wgmma header's target guard aside)."""
    assert nvcc_jobs.host_hidden_lines(cuda_source(SPILL_TEST_SPECS[0])) == []
    assert nvcc_jobs.ALLOWED_ARCH_TEST in cuda_source(next(s for s in SPILL_TEST_SPECS if s.family == "wgmma"))
    hidden = "#ifndef __CUDA_ARCH__\nint host_only() { return 1; }\n#endif\n"
    assert nvcc_jobs.host_hidden_lines(hidden) == ["#ifndef __CUDA_ARCH__"]
    with pytest.raises(AssertionError, match="__CUDA_ARCH__"):
        _compile(hidden, (SM90A,))


def test_spill_parser_catches_spills():
    report = ("ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'\n"
              "ptxas info    : Function properties for _Z3fooPf\n"
              "    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n")
    assert spills(report) == ["_Z3fooPf (sm_90a): 24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads"]


def test_wgmma_smem_mirror_matches_the_kernel(tmp_path):
    """spec's wgmma mirrors (what validation checks against the limits) equal the kernels' own
    kSmemBytes and kThreads, for the warp-specialized GEMM and its fallback, for every wgmma
    tile a search tries (and the round16 GEMM at 2 stages, where its two CTAs' stage counts, 2 and
    2, differ from the search's 3 and 4)."""
    specs = [s for s in enumerate_specs("gemm_scale_bn", 1024, 8192, 8192) if s.family == "wgmma"]
    assert specs
    specs += [Spec.of("gemm_scale_bn", 1024, 8192, 8192, math=m, backend="wgmma", fusion=1,
                      tile=Tile(128, 128, 32, 16, 128, stages=2)) for m in ("bf16", "fp16")]
    lines = ['#include "kgen/codegen/kernels/common.cuh"', '#include "kgen/codegen/kernels/mma_detail.cuh"',
             '#include "kgen/codegen/kernels/gemm_wgmma.cuh"', '#include "kgen/codegen/kernels/gemm_skinny.cuh"',
             '#include "kgen/codegen/kernels/gemm_wgmma_ws.cuh"', '#include "kgen/codegen/kernels/gemm_wgmma_half.cuh"',
             '#include "kgen/codegen/kernels/gemm_wgmma_f16x3.cuh"', '#include "kgen/codegen/kernels/gemm_wgmma_round16.cuh"']
    assert {s.math for s in specs} >= {"tf32x3", "fp16x3", "bf16", "fp16"}
    for s in specs:
        # (an fp16x3, bf16 or fp16 variant's forward GEMM; its GEMMs of any K are tf32x3's or tf32's, below)
        gemm = generator.gemm_type(s, s.in_features if s.math in ("fp16x3", "bf16", "fp16") else None)
        lines.append(f"static_assert({gemm}::kSmemBytes == {wgmma_smem_bytes(s.tile, s.math)}, "
                     f"\"{s.name()}\");")
        lines.append(f"static_assert({gemm}::kThreads == {wgmma_threads(s.tile)}, \"{s.name()}\");")
        if s.math == "fp16x3":
            # w split in registers up to spec's batch, on square tiles only (the template argument
            # the generator passes)
            rows = FP16X3_W_IN_REGISTERS_MAX_ROWS
            square = "" if s.tile.bm == s.tile.bn else "!"
            lines.append(f"static_assert({square}{gemm}::w_in_registers({rows}) && !{gemm}::w_in_registers({rows + 1}), "
                         f"\"{s.name()}\");")
            tf32x3 = s.replace(math="tf32x3", tile=dataclasses.replace(s.tile, stages=FP16X3_TF32X3_STAGES))
            assert generator.gemm_type(s) == generator.gemm_type(tf32x3)
            continue
        if s.math in ("bf16", "fp16"):
            tf32 = s.replace(math="tf32", tile=dataclasses.replace(s.tile, stages=ROUND16_TF32_STAGES))
            assert generator.gemm_type(s) == generator.gemm_type(tf32)
            gemm, s = generator.gemm_type(tf32), tf32
            lines.append(f"static_assert({gemm}::kSmemBytes == {wgmma_smem_bytes(s.tile, s.math)}, \"{s.name()}\");")
        lines.append(f"static_assert({gemm}::Fallback::kSmemBytes == "
                     f"{wgmma_fallback_smem_bytes(s.tile, s.math)}, \"{s.name()}\");")
    cu = tmp_path / "mirror.cu"
    cu.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([NVCC, "-std=c++17", "-c", SM90A, f"-I{ROOT}", str(cu), "-o",
                           str(tmp_path / "mirror.o")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f", {WGMMA_FLUSH_KTILES}, " in generator.gemm_type(specs[0])


def test_generated_wgmma_wrappers_are_current():
    """gemm_wgmma.cuh holds exactly what scripts/gen_wgmma.py writes."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_wgmma.py"), "--check"])
    assert proc.returncode == 0, "run `python scripts/gen_wgmma.py`"


def test_tile_grid_says_what_to_launch(tmp_path):
    """Every GEMM launcher sizes its grid with tile_grid (common.cuh): host code, so it runs here."""
    cu = tmp_path / "grid.cu"
    cu.write_text('#include "kgen/codegen/kernels/common.cuh"\n#include <cstdio>\n' + r'''
int main() {
  struct Case { int M, N, K; bool launch; cudaError_t status; unsigned tiles; };
  const Case cases[] = {
      {1024, 8192, 8192, true, cudaSuccess, 8 * 64},   // whole tiles
      {129, 131, 68, true, cudaSuccess, 2 * 2},        // partial tiles round up
      {1, 1, 0, true, cudaSuccess, 1},                 // K = 0: z = 0 still needs writing
      {0, 5, 7, false, cudaSuccess, 0},                // empty z: nothing to do
      {5, 0, 7, false, cudaSuccess, 0},
      {-1, 5, 7, false, cudaErrorInvalidValue, 0},
      {5, 5, -1, false, cudaErrorInvalidValue, 0},
      {2147483647, 2147483647, 1, false, cudaErrorInvalidValue, 0},  // more tiles than a grid
  };
  int bad = 0;
  for (const Case& c : cases) {
    unsigned tiles = 0;
    cudaError_t status = cudaErrorUnknown;
    const bool launch = kgen::tile_grid<128, 128>(c.M, c.N, c.K, tiles, status);
    if (launch != c.launch || status != c.status || (launch && tiles != c.tiles)) {
      std::printf("M=%d N=%d K=%d: launch %d status %d tiles %u\n", c.M, c.N, c.K, launch,
                  static_cast<int>(status), tiles);
      ++bad;
    }
  }
  return bad;
}
''')
    exe = tmp_path / "grid"
    build = subprocess.run([NVCC, "-std=c++17", f"-I{ROOT}", str(cu), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout


def test_the_smem_limit_of_the_target_is_asserted_in_the_kernel_source(tmp_path):
    """kgen_cfg::kMaxSmemBytes comes from spec.ARCH_LIMITS; a tile over it does not compile."""
    from kgen.tune.spec import ARCH_LIMITS, Spec, Tile

    big = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="kgen",
                  tile=Tile(128, 128, 32, 64, 32, stages=4), arch="sm_80")
    source = generator.render_cuda_source(big)
    line = f"constexpr int kMaxSmemBytes = {ARCH_LIMITS['sm_80']['smem']};"
    assert line in source
    small = source.replace(line, f"constexpr int kMaxSmemBytes = {ARCH_LIMITS['sm_86']['smem']};")
    cu = tmp_path / "k.cu"
    cu.write_text(small)
    proc = subprocess.run([NVCC, "-std=c++17", "-c", SM80, str(cu), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode != 0 and "more shared memory than the target allows" in proc.stderr


READELF = shutil.which("readelf")


@pytest.mark.skipif(READELF is None, reason="readelf (binutils) not on PATH")
def test_an_extension_exports_its_entry_points_only(tmp_path):
    """Two emitted files in one process define the same C++ names (kgen_part0::kgen_cfg::...,
    the kernel templates); every symbol but the kgen_* entry points is hidden, or the dynamic
    linker binds one library's data to another's (g++ emits inline variables as STB_GNU_UNIQUE:
    a backward once read another module's slot table so, on the GPU tier)."""
    from kgen.tune.spec import Spec, Tile

    spec = Spec.of("gemm_bn_scale_softmax", 64, 128, 256, math="tf32x3", backend="kgen", fusion=1,
                   tile=Tile(128, 128, 32, 64, 32, stages=3), arch="sm_80")
    source = generator.render_cuda_source(spec)
    assert "static constexpr int kSlotOperand" in source    # the data that was bound across files
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    proc = subprocess.run([NVCC, "-std=c++17", "-c", SM80, "-Xcompiler", "-fPIC", str(cu), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    table = subprocess.run([READELF, "-sW", str(tmp_path / "k.o")], capture_output=True, text=True).stdout
    exported = []
    for line in table.splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(fields) == 8 and fields[4] in ("GLOBAL", "WEAK", "UNIQUE") and fields[5] == "DEFAULT" \
                and fields[6] != "UND":
            exported.append((fields[3], fields[7]))
    # (Weak instantiations of system headers' templates, e.g. std::max<int> or dim3's
    # constructor, stay visible: identical in every library, they may bind to any.)
    assert [name for kind, name in exported if kind == "OBJECT"] == []
    ours = {name for kind, name in exported if "kgen" in name}
    # (a tf32x3 file: no sizes of a split of w, which only fp16x3's GEMM makes; the packed backward
    # entry is the C++ autograd node's, which trains fp32 modules too)
    assert ours == {"kgen_forward_0", "kgen_workspace_floats_0", "kgen_backward_0", "kgen_backward_floats_0",
                    "kgen_backward_packed_0", "kgen_output_is_operand_typed_0"}


ROW_OPS_SHARE_A_PARAMETER = module_source("""
    r1 = x.sum(dim=1, keepdim=True) * self.s
    y = x * r1
    r2 = y.amax(dim=1, keepdim=True)
    x = torch.sigmoid(y - r2 * self.s + r1)
""", {"s": "nn.Parameter(torch.rand(1) + 0.5)"}, 32)


def test_row_ops_after_two_reductions_share_a_parameter(tmp_path):
    """A one-element parameter used by row ops after two reductions is declared once in the
    row function's scope (the forward's row kernel declared it twice, which nvcc refused)."""
    from kgen.tune.spec import Spec, Tile

    ref = tmp_path / "shared_parameter.py"
    ref.write_text(ROW_OPS_SHARE_A_PARAMETER)
    spec = Spec.of(str(ref), 8, 16, 32, math="tf32x3", backend="kgen", fusion=1,
                   tile=Tile(128, 128, 32, 64, 32, stages=3), arch="sm_80")
    compile_report(generator.render_cuda_source(spec), tmp_path, (SM80,))


def test_the_shared_memory_record_is_each_librarys_own(tmp_path):
    """allow_dynamic_smem's record of the shared memory it allowed a kernel stays in the library
    that keeps it: no process-wide ("unique") symbol, even where nvcc leaves kernels visible as it
    did before CUDA 13.0 (there two builds of one file, the plain one and the one for autocast,
    name their kernels alike, and the second would skip allowing its own)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not on PATH")
    (tmp_path / "k.cu").write_text('#include "common.cuh"\n'
                                   "__global__ void kernel(int) {}\n"
                                   "int allow() { return static_cast<int>(kgen::allow_dynamic_smem<kernel>(1 << 16)); }\n")
    kernels = ROOT / "kgen" / "codegen" / "kernels"
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-std=c++17", "-arch=sm_80", f"-I{kernels}",
                    "-device-entity-has-hidden-visibility=false", "-static-global-template-stub=false",
                    str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.so")], check=True, capture_output=True, timeout=300)
    symbols = subprocess.run([readelf, "-Ws", str(tmp_path / "k.so")], check=True, capture_output=True,
                             text=True).stdout
    records = [line for line in symbols.splitlines() if "allow_dynamic_smem" in line and "allowed" in line]
    assert records and not [line for line in records if " UNIQUE " in line], records
