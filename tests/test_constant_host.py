"""A constant output's kernels (kgen/codegen/kernels/constant.cuh) compiled for the host with g++
and run by 4 threads per CTA with CUDA's barrier-reductions emulated, on KernelBench 80's module
(tests/refs/gemm_max_sub_gelu.py, whose output rewrites make 0): the NaN pattern must be torch's
for NaN and infinities in rows of x, in W and in the bias, on the 16-byte path (K % 4 == 0) and
the element one; and the flag of a 16-bit build (bf16, fp16) is set by their NaN and infinities
only. Plus: the emitted CUDA compiles with nvcc for sm_90a, in the fp32 and the 16-bit builds."""

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.codegen.generator import CODEGEN_DIR
from kgen.frontend.problems import graph, load
from kgen.lower.forward import constant_reads_struct, lower
from kgen.tune.spec import Spec

import host_builds
from conftest import nvcc_prefetch
from nvcc_jobs import SM90A, report_job

GXX = shutil.which("g++")
NVCC = shutil.which("nvcc")
REF = str(Path(__file__).parent / "refs" / "gemm_max_sub_gelu.py")
SOURCE = (CODEGEN_DIR / "kernels" / "constant.cuh").read_text()
# The kernels, without the launcher (CUDA's <<<>>>), which the host harness replaces.
KERNELS = SOURCE.split("// The constant output [M][width]")[0].replace("#pragma once\n", "") + "}  // namespace kgen\n"

SHIMS = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __CUDA_BF16_TYPES_EXIST__
#define __CUDA_FP16_TYPES_EXIST__
struct __nv_bfloat16 { unsigned short bits; };
struct __half { unsigned short bits; };
struct uint4 { unsigned int x, y, z, w; };
template <class T> inline T __ldg(const T* p) { return *p; }
inline unsigned int __float_as_uint(float v) { unsigned int u; std::memcpy(&u, &v, 4); return u; }
struct Index { unsigned x; };
constexpr int T = 4;
thread_local Index threadIdx{0};
Index blockIdx{0}, blockDim{T}, gridDim{1};
std::barrier<>* block_barrier;
static int or_values[T];
inline int __syncthreads_or(int p) {
  block_barrier->arrive_and_wait();
  or_values[threadIdx.x] = p;
  block_barrier->arrive_and_wait();
  int r = 0;
  for (int i = 0; i < T; ++i) r |= or_values[i];
  block_barrier->arrive_and_wait();
  return r;
}
namespace kgen {
constexpr int kMaxOperands = 16;
using Operand = float;   // the fp32 build's (common.cuh)
using Param = float;
inline float as_float(float v) { return v; }
struct EpilogueParams { const void* operand[kMaxOperands]; int N; };
}
"""

MAIN = r"""
typedef @ELEM@ Elem;
typedef kgen::FloatBits<Elem>::Word Word;
// Every CTA of a grid in turn, its T threads together.
template <class F> void launch(int grid, F body) {
  gridDim.x = grid;
  std::barrier<> barrier(T);
  block_barrier = &barrier;
  for (unsigned b = 0; b < static_cast<unsigned>(grid); ++b) {
    blockIdx.x = b;
    std::vector<std::thread> threads;
    for (int t = 0; t < T; ++t) threads.emplace_back([&, t] { threadIdx.x = t; body(); });
    for (auto& t : threads) t.join();
  }
}
// stdin: M N K, then x [M][K] and W [N][K] as the bits of Elem, then the bias [N] as fp32 bits.
// stdout: the output [M] (one row value each), then the flag.
int main() {
  int M, N, K;
  if (scanf("%d %d %d", &M, &N, &K) != 3) return 1;
  // (16-byte aligned, as the emitted file's x and W are.)
  std::vector<uint4> xs((M * K * sizeof(Word) + 15) / 16 + 1), ws((N * K * sizeof(Word) + 15) / 16 + 1);
  Word* x = reinterpret_cast<Word*>(xs.data());
  Word* w = reinterpret_cast<Word*>(ws.data());
  std::vector<float> bias(N);
  unsigned v;
  for (int i = 0; i < M * K; ++i) { scanf("%u", &v); x[i] = static_cast<Word>(v); }
  for (int i = 0; i < N * K; ++i) { scanf("%u", &v); w[i] = static_cast<Word>(v); }
  for (auto& b : bias) { scanf("%u", &v); std::memcpy(&b, &v, 4); }
  kgen::EpilogueParams p{};
  p.operand[0] = bias.data();
  p.N = N;
  unsigned int flag = 0;
  std::vector<float> out(M, -1.f);
  const Elem* xe = reinterpret_cast<const Elem*>(x);
  const Elem* we = reinterpret_cast<const Elem*>(w);
  launch(3, [&] { kgen::constant_flag_kernel<kgen_cfg::ConstantReads, Elem>(we, static_cast<long long>(N) * K, p, N, &flag); });
  launch(M, [&] { kgen::constant_rows_kernel<kgen_cfg::ConstantReads, Elem>(xe, K, 1, &flag, 0.0f,
                                                                           kgen_cfg::ConstantReads::kNonFiniteValue, out.data()); });
  for (float o : out) printf("%.9g ", o);
  printf("\n%u\n", flag);
}
"""

pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
M, N = 7, 5


def _reads_struct(k: int) -> str:
    low = lower(graph(REF, M, k, N).parts[0], False, False)
    out = low.graph.node(low.graph.output)
    assert low.constant == 0.0 and [n.attrs["path"] for n in low.operands] == ["gemm.bias"]
    return constant_reads_struct(low.graph, out, {"gemm.bias": 0})


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    """The host build of the kernels per element type (fp32, bf16, fp16)."""
    d = tmp_path_factory.mktemp("constant_host")
    out = {}
    for elem in ("float", "__nv_bfloat16", "__half"):
        source = (SHIMS + KERNELS + "namespace kgen_cfg {\n" + _reads_struct(8) + "\n}\n"
                  + MAIN.replace("@ELEM@", elem))
        (d / f"{elem}.cpp").write_text(source)
        build = host_builds.build(d / f"{elem}.cpp", d / elem)
        assert build.returncode == 0, build.stderr[-3000:]
        out[elem] = d / elem
    return out


def _bits(t: torch.Tensor) -> list[int]:
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[t.dtype]
    mask = 0xFFFFFFFF if t.dtype == torch.float32 else 0xFFFF
    return [int(b) & mask for b in t.contiguous().view(view).reshape(-1).tolist()]


def run_kernels(binary, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, int]:
    m, k = x.shape
    text = " ".join(map(str, [m, w.shape[0], k] + _bits(x) + _bits(w) + _bits(bias.float())))
    run = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    values, flag = run.stdout.split("\n")[:2]
    return torch.tensor([float(v) for v in values.split()]).reshape(m, 1), int(flag)


POISONS = {
    "clean": [],
    "NaN and Inf in rows": [("x", (1, 0), "nan"), ("x", (3, -1), "inf"), ("x", (5, 2), "-inf")],
    "NaN in W (its last element)": [("w", (-1, -1), "nan")],
    "Inf in W": [("w", (2, 3), "inf")],
    "NaN in the bias": [("b", (N - 1,), "nan")],
    "Inf in the bias": [("b", (0,), "inf")],
}


@pytest.mark.parametrize("k", [8, 6], ids=["16-byte loads", "element loads"])
@pytest.mark.parametrize("case", POISONS)
def test_nan_pattern_is_torchs(binaries, case, k):
    """KernelBench 80's module on CPU against the kernels: NaN exactly where torch has it.
    (An infinity in W gives torch NaN in every row here: x > 0 makes that column +inf, and
    the row max is +inf.)"""
    torch.manual_seed(0)
    ref = load(REF, M, k, N)
    model = ref.Model(*ref.init_args())
    x = torch.rand(M, k)
    with torch.no_grad():
        for what, index, value in POISONS[case]:
            {"x": x, "w": model.gemm.weight, "b": model.gemm.bias}[what][index] = float(value)
        expected = model(x)
    if k != 8:
        # (The struct does not depend on K: the one built for K = 8.)
        assert _reads_struct(k) == _reads_struct(8)
    got, flag = run_kernels(binaries["float"], x, model.gemm.weight.detach(), model.gemm.bias.detach())
    assert torch.equal(torch.isnan(got), torch.isnan(expected)), (got, expected)
    assert torch.equal(got.nan_to_num(), expected.nan_to_num())
    assert flag == int(case != "clean" and "rows" not in case)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_builds_flag_their_nan_and_infinities(binaries, dtype):
    """In a bf16 / fp16 build x and W are 16-bit: their NaN and infinities (of each format's
    exponent field) flag rows and W; their largest finite values do not."""
    binary = binaries["__nv_bfloat16" if dtype == torch.bfloat16 else "__half"]
    largest = torch.finfo(dtype).max
    x = torch.rand(M, 16).to(dtype)
    x[0, 0], x[2, 15], x[4, 9], x[6, 1] = largest, float("nan"), float("-inf"), -largest
    w = torch.rand(N, 16).to(dtype)
    w[1, 1] = largest
    bias = torch.zeros(N)
    got, flag = run_kernels(binary, x, w, bias)
    assert torch.isnan(got).reshape(-1).tolist() == [False, False, True, False, True, False, False]
    assert flag == 0
    w[3, 15] = float("inf")
    got, flag = run_kernels(binary, x, w, bias)
    assert torch.isnan(got).all() and flag == 1


# The extension of KernelBench 80's file: its constant path with the NaN kernels.
CONSTANT_SPEC = Spec.from_dict({"arch": "sm_90a", "backend": "wgmma", "batch": 1024, "constants": [], "fusion": 1,
                                "in_features": 8192, "math": "tf32x3", "out_features": 8192, "problem": REF,
                                "tile": {"bk": 32, "bm": 128, "bn": 128, "group_m": 8, "stages": 4, "tm": 0, "tn": 0,
                                         "wm": 16, "wn": 128}})


def constant_build_job(operand: str):
    return report_job(generator.render_cuda_source(CONSTANT_SPEC), (SM90A, f"-DKGEN_OPERAND={operand}"))


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
@nvcc_prefetch(lambda p: [constant_build_job(p["operand"])])
@pytest.mark.parametrize("operand", ["float", "__nv_bfloat16"])
def test_constant_output_compiles_for_sm90a(tmp_path, operand):
    """The extension of KernelBench 80's file (its constant path with the NaN kernels) compiles
    with nvcc for sm_90a, in the fp32 build and a 16-bit one, without spills."""
    from test_compile import compile_report, spills

    job = constant_build_job(operand)
    assert "constant_flag_kernel" in job.source and "kAny = true" in job.source
    report = compile_report(job.source, tmp_path, job.flags)
    assert "constant_rows_kernel" in report
    assert spills(report) == [], "\n".join(spills(report))
