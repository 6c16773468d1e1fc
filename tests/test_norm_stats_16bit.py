"""BatchNorm's and GroupNorm's statistics in a 16-bit build are eager's. On an H100 kgen's bf16
GEMM is cuBLAS's to the bit (docs/perf.md, session 9), so the statistics were what KernelBench's
bf16 eval saw differ. BatchNorm's: those of its input t as eager's BatchNorm sees it (the
Linear's output and each step after it rounded to the module's dtype; an fp32 build takes those
of S, what stage 1 stores, and finalize moves them to t). GroupNorm's: torch's Welford
statistics in its order. Here: the generated code, for modules written with the bias, without
it, and with a scale between the Linear and BatchNorm."""
import re
import shutil
import subprocess

import pytest

from conftest import module_source, reference_text
from kgen.codegen.generator import CODEGEN_DIR
from kgen.frontend.problems import graph
from kgen.lower.forward import lower

ROUND = "kgen::rounded_to_module<kgen_operand_t>"


def _bn_structs(tmp_path, body: str, params: dict, bias: bool = True) -> tuple[str, str]:
    src = module_source(body, params, 16)
    if not bias:
        src = src.replace("nn.Linear(in_features, out_features)", "nn.Linear(in_features, out_features, bias=False)")
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    bn_input = re.search(r"struct BnInput \{.*?\n\};", low.cuda, re.S).group(0)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert low.cuda.index("struct BnInput") < low.cuda.index("struct TrainEpilogue"), \
        "the epilogue asks BnInput for stat: declared first"
    return bn_input, train


def _stat_body(bn_input: str) -> list[str]:
    body = bn_input[bn_input.index("} else {"):]
    return [line.strip() for line in body.splitlines()[1:] if line.strip() not in ("}", "};")]


@pytest.mark.parametrize("bias", [True, False])
def test_statistics_of_t_rounded_as_eager_in_a_16_bit_build(tmp_path, bias):
    bn_input, train = _bn_structs(tmp_path, "x = self.bn(x)", {"bn": "nn.BatchNorm1d(out_features)"}, bias)
    assert "static constexpr bool kStatsOfT = !std::is_same<kgen_operand_t, float>::value;" in bn_input
    # fp32: the statistics of S itself
    assert "if constexpr (!kStatsOfT) {\n      return s;" in bn_input
    body = _stat_body(bn_input)
    if bias:   # F.linear rounds once, after its bias
        assert any(f"{ROUND}(((s) + (v" in line for line in body), body
        assert sum(ROUND in line for line in body) == 1
    else:      # the Linear's output rounded by itself
        assert body[-1] == f"return {ROUND}(s);", body
    # fused statistics: the epilogue takes them of BnInput::stat, in registers only where that is S
    assert "static constexpr bool kStatsOfStored = !BnInput::kStatsOfT;" in train
    assert "return BnInput::stat(s, n, p);" in train


@pytest.mark.parametrize("line", [
    "x = F.linear(x, self.weight, self.b * 2)",
    "x = F.linear(x, self.weight, bias=self.b + self.c)",
    "x = torch.addmm(self.b, x, self.weight.t())",
])
def test_a_bias_computed_from_parameters_is_added_before_the_linears_one_rounding(tmp_path, line):
    """A GEMM's bias that is a per-column value (a parameter, or one computed from parameters, as
    F.linear(x, W, self.b * 2) passes it) is added to z in fp32 before the Linear's output is
    rounded to the module's dtype, as torch's GEMM adds it. Rounding z first put a bf16 file at
    2-4x eager's error against fp64, and KernelBench's eval failed it (docs/perf.md, session 57)."""
    ref = tmp_path / "m.py"
    ref.write_text(reference_text(["self.weight = nn.Parameter(torch.randn(out_features, in_features))",
                                   "self.b = nn.Parameter(torch.randn(out_features))",
                                   "self.c = nn.Parameter(torch.randn(out_features))"],
                                  [line, "x = torch.tanh(x)"], 16))
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert f"{ROUND}(z)" not in train, train
    assert re.search(re.escape(f"{ROUND}(((z) + (v") + r"\d+\)\)\);", train), train


@pytest.mark.parametrize("line", [
    "x = x @ self.weight.t() + self.b * 2",
    "x = F.linear(x, self.weight) + self.b",
    "x = F.linear(x, self.weight) / 3.0 + self.b",
])
def test_a_bias_added_by_an_op_of_its_own_is_added_to_the_rounded_z(tmp_path, line):
    """`x @ W.t() + b` is two ops in eager: z rounded to the module's dtype, then the sum (session
    59: kgen's one rounding put bf16 files one step from eager on large values, beyond
    KernelBench's 1e-2). Only the bias the GEMM's call adds is inside its rounding (Node.linear_bias)."""
    ref = tmp_path / "m.py"
    ref.write_text(reference_text(["self.weight = nn.Parameter(torch.randn(out_features, in_features))",
                                   "self.b = nn.Parameter(torch.randn(out_features))"],
                                  [line, "x = torch.tanh(x)"], 16))
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert f"{ROUND}(z)" in train, train


@pytest.mark.parametrize("line, scaled", [
    ("x = torch.addmm(self.b, x, self.weight.t(), alpha=0.5)", "((z) * (0.5f))"),
    ("x = torch.addmm(self.b, x, self.weight.t(), beta=2.0, alpha=0.5)", "((z) * (0.5f))"),
])
def test_addmms_alpha_is_inside_the_linears_one_rounding(tmp_path, line, scaled):
    """torch.addmm(b, x, Wᵀ, alpha=α) computes α z + b in fp32 and rounds once: z and α z are not
    rounded by themselves (a scaled z before a bias: rounded once too)."""
    ref = tmp_path / "m.py"
    ref.write_text(reference_text(["self.weight = nn.Parameter(torch.randn(out_features, in_features))",
                                   "self.b = nn.Parameter(torch.randn(out_features))"],
                                  [line, "x = torch.tanh(x)"], 16))
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    scaling = re.search(r"const float (v\d+) = " + re.escape(scaled) + ";", train)
    assert scaling, train
    assert re.search(re.escape(f"{ROUND}((({scaling.group(1)}) + (v") + r"\d+\)\)\);", train), train
    assert f"{ROUND}(z)" not in train


@pytest.mark.parametrize("init, line, out_features", [
    (["self.gemm = nn.Linear(in_features, out_features)"], "x = self.gemm(x)", 1),
    (["self.weight = nn.Parameter(torch.randn(out_features, in_features))", "self.s = nn.Parameter(torch.randn(1))"],
     "x = F.linear(x, self.weight, self.s)", 16),
    (["self.weight = nn.Parameter(torch.randn(out_features, in_features))", "self.s = nn.Parameter(torch.randn(1))"],
     "x = F.linear(x, self.weight, self.s * 2)", 16),
])
def test_a_one_element_bias_is_added_before_the_linears_one_rounding_too(tmp_path, init, line, out_features):
    """A bias of one element (nn.Linear(in_features, 1)'s, or a (1,) parameter F.linear
    broadcasts) is scalar-level in the IR, not col-level; torch's GEMM still adds it before its
    one rounding (the rule before session 57 took any parameter; col-level alone, for a while in
    session 57, rounded z first: the review found it)."""
    ref = tmp_path / "m.py"
    ref.write_text(reference_text(init, [line, "x = torch.tanh(x)"], out_features))
    low = lower(graph(str(ref), 8, 16, out_features).parts[0], True, False)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert f"{ROUND}(z)" not in train, train
    assert re.search(re.escape(f"{ROUND}(((z) + (v") + r"\d+\)\)\);", train), train


def test_a_python_number_added_to_z_is_added_after_its_rounding(tmp_path):
    """F.linear(x, W) + 1.0: eager's GEMM rounds z, then the add rounds again (no GEMM takes a
    number as its bias), so kgen rounds z first too."""
    ref = tmp_path / "m.py"
    ref.write_text(reference_text(["self.weight = nn.Parameter(torch.randn(out_features, in_features))"],
                                  ["x = F.linear(x, self.weight) + 1.0", "x = torch.tanh(x)"], 16))
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert f"{ROUND}(z)" in train, train


def test_each_step_between_the_linear_and_batchnorm_is_rounded(tmp_path):
    """Linear -> * scale -> BatchNorm (KernelBench 33): t = round(round(z + b) * scale)."""
    bn_input, _ = _bn_structs(tmp_path, "x = x * self.scale\nx = self.bn(x)",
                              {"scale": "nn.Parameter(torch.randn(out_features))",
                               "bn": "nn.BatchNorm1d(out_features)"})
    body = _stat_body(bn_input)
    rounded = [line for line in body if ROUND in line]
    assert len(rounded) == 2 and "+" in rounded[0] and "*" in rounded[1], body
    # the same steps as the affine fold, in the same order
    assert "shift = shift + " in bn_input and "scale = scale * " in bn_input


def test_no_batchnorm_no_stat(tmp_path):
    src = module_source("x = torch.relu(x)", {}, 16)
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    bn_input = re.search(r"struct BnInput \{.*?\n\};", low.cuda, re.S).group(0)
    assert "stat(" not in bn_input and "kStatsOfStored" not in low.cuda


def test_group_norm_statistics_as_torch_takes_them_in_a_16_bit_build(tmp_path):
    """GroupNorm in a 16-bit build: torch's own Welford statistics (each lane's elements, then the
    warp's tree: here a segment of 4 lanes per group of 4, the tree's steps that reach lanes with
    an element), its eps in the module's dtype, rsqrtf, the mean and 1/std rounded to the
    module's dtype; an fp32 build keeps the two passes."""
    src = module_source("x = self.gn(x)", {"gn": "nn.GroupNorm(4, out_features)"}, 16)
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    fp32, half = low.cuda.split("if constexpr (std::is_same<kgen_operand_t, float>::value) {", 1)[1].split("else {", 1)
    assert "kgen::lanes_sum<4>(sum)" in fp32 and "1.0f / sqrtf(q / static_cast<float>(size) + " in fp32
    assert "const int size = (kAtTracedWidth ? 4 : N / 4)" in low.cuda
    assert "kgen::welford_add<true>(acc, " in half and "acc = kgen::welford_lanes_reduce<4, true>(acc);" in half
    # the mean and 1/std rounded to the module's dtype, as torch 2.11 normalizes with them
    assert "= kgen::rounded_to_module<kgen_operand_t>(acc.mean);" in half
    assert ("= kgen::rounded_to_module<kgen_operand_t>(rsqrtf(acc.m2 / acc.nf + "
            "kgen::rounded_to_module<kgen_operand_t>(9.99999975e-06f)));") in half


# ---- kgen::welford_* (kernels/stages.cuh) on the host: torch's WelfordOps, in torch's order ----
WELFORD_MAIN = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define __device__
#define __forceinline__ inline
// One warp emulated: 32 threads; __shfl_down_sync reads lane + offset's value within the lane's
// segment of `width` lanes (its own where that is past the segment), all lanes at once (a
// barrier before the write and after).
static std::barrier<>* warp_barrier;
static float slots[32];
thread_local int lane_id;
inline float __shfl_down_sync(unsigned, float v, int offset, int width = 32) {
  warp_barrier->arrive_and_wait();
  slots[lane_id] = v;
  warp_barrier->arrive_and_wait();
  const float r = lane_id % width + offset < width ? slots[lane_id + offset] : v;
  return r;
}
#include <cstring>
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __fmul_rn(float a, float b) { return a * b; }
namespace kgen {
@WELFORD@
}
// One lane's Welford state of its group, reduced as the row function reduces it: torch's W lanes
// on L lanes a group (lane p of the group holds torch's lanes p, p + L, ...), each of torch's lanes
// u taking the elements u, u + W, ... (W = 32: torch's stride); P: kPow2Products.
template <int W, int L, bool P>
kgen::Welford lane_stats(const std::vector<float>& x, int n, int l) {
  const int group = l / L, p = l % L;
  kgen::Welford acc[W / L];
  for (int held = 0; held < W / L; ++held) {
    for (int i = p + held * L; i < n; i += W) kgen::welford_add<P>(acc[held], x[group * n + i]);
  }
  if constexpr (W == L && W == 32) {
    return kgen::welford_warp_reduce<P>(acc[0]);
  } else if constexpr (W == L) {
    return kgen::welford_lanes_reduce<L, P>(acc[0]);
  } else {
    return kgen::welford_virtual_reduce<W, L, P>(acc);
  }
}
template <int W, int L>
kgen::Welford lane_stats(const std::vector<float>& x, int n, int l, int P) {
  return P ? lane_stats<W, L, true>(x, n, l) : lane_stats<W, L, false>(x, n, l);
}
// stdin: n W L P, then 32 / L groups of n values: lanes [s L, (s + 1) L) take group s (n <= W where
// W < 32); P 1: the divisions by power-of-two counts as products (kPow2Products).
// stdout: each group's (mean, m2, nf) as its first lane holds them.
int main() {
  int n, W, L, P;
  std::vector<float> x;
  float v;
  if (std::scanf("%d %d %d %d", &n, &W, &L, &P) != 4) return 2;
  while (std::scanf("%a", &v) == 1) x.push_back(v);
  std::barrier<> barrier(32);
  warp_barrier = &barrier;
  std::vector<kgen::Welford> out(32 / L);
  std::vector<std::thread> lanes;
  for (int l = 0; l < 32; ++l) {
    lanes.emplace_back([&, l] {
      lane_id = l;
      kgen::Welford acc;
      switch (W * 100 + L) {
        case 101: acc = lane_stats<1, 1>(x, n, l, P); break;
        case 202: acc = lane_stats<2, 2>(x, n, l, P); break;
        case 404: acc = lane_stats<4, 4>(x, n, l, P); break;
        case 808: acc = lane_stats<8, 8>(x, n, l, P); break;
        case 1616: acc = lane_stats<16, 16>(x, n, l, P); break;
        case 1608: acc = lane_stats<16, 8>(x, n, l, P); break;
        case 3232: acc = lane_stats<32, 32>(x, n, l, P); break;
        case 3216: acc = lane_stats<32, 16>(x, n, l, P); break;
        case 3208: acc = lane_stats<32, 8>(x, n, l, P); break;
        case 3204: acc = lane_stats<32, 4>(x, n, l, P); break;
        default: std::exit(3);
      }
      if (l % L == 0) out[l / L] = acc;
    });
  }
  for (auto& t : lanes) t.join();
  for (const auto& o : out) std::printf("%a %a %a\n", o.mean, o.m2, o.nf);
}
"""


def _torch_welford_one_warp(x: list[float]) -> tuple[float, float, float]:
    """torch's RowwiseMomentsCUDAKernel for one group with a warp: each lane WelfordOps::reduce
    over elements lane, lane + 32, ...; then cuda_utils::WarpReduce (offsets 16..1, each lane
    combining the state of lane + offset, its own past lane 31) with WelfordOps::combine.
    float32 arithmetic, each operation rounded (no contraction)."""
    import numpy as np

    f = np.float32
    lanes = []
    for lane in range(32):
        mean, m2, n = f(0), f(0), 0
        for v in x[lane::32]:
            n += 1
            nf = f(n)
            delta = f(f(v) - mean)
            mean = f(mean + f(delta / nf))
            m2 = f(m2 + f(delta * f(f(v) - mean)))
        lanes.append((mean, m2, f(n)))
    offset = 16
    while offset > 0:
        new = []
        for lane in range(32):
            a, b = lanes[lane], lanes[lane + offset] if lane + offset < 32 else lanes[lane]
            if a[2] == 0:
                new.append(b)
            elif b[2] == 0:
                new.append(a)
            else:
                delta = f(b[0] - a[0])
                count = f(a[2] + b[2])
                nb_over_n = f(b[2] / count)
                new.append((f(a[0] + f(delta * nb_over_n)),
                            f(f(a[1] + b[1]) + f(f(f(delta * delta) * a[2]) * nb_over_n)), count))
        lanes, offset = new, offset // 2
    return lanes[0]


@pytest.fixture(scope="module")
def welford_exe(tmp_path_factory):
    """kernels/stages.cuh's kgen::Welford, welford_add and welford_warp_reduce in WELFORD_MAIN,
    compiled with g++ once."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    stages = (CODEGEN_DIR / "kernels" / "stages.cuh").read_text()
    welford = re.search(r"struct Welford \{.*?\n__device__ __forceinline__ Welford welford_virtual_reduce.*?\n\}\n",
                        stages, re.S).group(0)
    folder = tmp_path_factory.mktemp("welford")
    src, exe = folder / "welford.cpp", folder / "welford"
    src.write_text(WELFORD_MAIN.replace("@WELFORD@", welford))
    build = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-pthread", str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return exe


def _groups_as_torch_takes_them(welford_exe, x: list, n: int, torch_lanes: int, lanes: int, products: bool) -> list:
    """The emulated warp's (mean, m2, nf) of each of its 32 / lanes groups of n values of x
    (WELFORD_MAIN), asserted equal, bit for bit, to torch's one-warp Welford of each group; returned."""
    run = subprocess.run([str(welford_exe)], input=f"{n} {torch_lanes} {lanes} {int(products)}\n"
                         + " ".join(float(v).hex() for v in x), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = [float.fromhex(t) for t in run.stdout.split()]
    want = [float(v) for g in range(32 // lanes) for v in _torch_welford_one_warp(x[g * n:(g + 1) * n])]
    assert got == want
    return got


@pytest.mark.parametrize("products", [False, True], ids=["divisions", "pow2 products"])
@pytest.mark.parametrize("offset", [0.0, 40.0])
@pytest.mark.parametrize("n", [1, 7, 32, 45, 64, 77, 256, 333, 511])
def test_welford_is_torchs_welford_ops_in_torchs_order(welford_exe, n, offset, products):
    """kgen::welford_add and welford_warp_reduce compiled for the host (no contraction, as the
    reference below) give torch's one-warp Welford statistics bit for bit: a wrong formula, a
    lane combining the wrong neighbour or the tree in another order changes the bits."""
    import numpy as np

    # lanes of unequal counts (n % 32 != 0: combines of 3 and 2 elements, ...); |mean| >> std
    x = (np.random.default_rng(n).standard_normal(n).astype(np.float32) * 3 + np.float32(offset)).tolist()
    got = _groups_as_torch_takes_them(welford_exe, x, n, 32, 32, products)
    assert abs(got[0] - float(np.mean(np.float64(x)))) < 1e-3 and got[2] == n


@pytest.mark.parametrize("products", [False, True], ids=["divisions", "pow2 products"])
@pytest.mark.parametrize("offset", [0.0, 40.0])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11, 16])
def test_a_segment_of_lanes_per_small_group_gives_torchs_one_warp_bits(welford_exe, n, offset, products):
    """GroupNorm's groups of at most 16 elements take a segment of L lanes each (L the power of
    two that holds the group, 32 / L groups a warp: kgen/lower/forward.py, _group_stats_pass):
    welford_lanes_reduce<L> gives each segment's lane 0 the bits of torch's one-warp Welford of
    that group alone (its other lanes empty), every group of the warp at once."""
    import numpy as np

    lanes = 1
    while lanes < n:
        lanes *= 2
    groups = 32 // lanes
    x = (np.random.default_rng(100 + n).standard_normal(groups * n).astype(np.float32) * 3
         + np.float32(offset)).tolist()
    got = _groups_as_torch_takes_them(welford_exe, x, n, lanes, lanes, products)
    assert abs(got[0] - float(np.mean(np.float64(x[:n])))) < 1e-3 and got[2] == n


@pytest.mark.parametrize("products", [False, True], ids=["divisions", "pow2 products"])
@pytest.mark.parametrize("torch_lanes, lanes, n", [
    (32, 8, 17), (32, 8, 32), (32, 8, 33), (32, 8, 45), (32, 8, 64), (32, 8, 100), (32, 8, 256), (32, 8, 511),
    (32, 16, 64), (32, 4, 77), (16, 8, 9), (16, 8, 16)])
def test_a_lane_holding_several_of_torchs_lanes_gives_torchs_one_warp_bits(welford_exe, torch_lanes, lanes, n, products):
    """Groups of more than GROUP_LANES elements take GROUP_LANES lanes each, a lane holding the
    states of several of torch's lanes (kgen/lower/forward.py, _group_stats_pass;
    welford_virtual_reduce): the tree's steps between them combined within the lane, the rest
    shuffled, give each group's first lane the bits of torch's one-warp Welford, 32 / lanes groups a
    warp at once. (A step combining the wrong pair, or in another order, changes the bits.)"""
    import numpy as np

    groups = 32 // lanes
    x = (np.random.default_rng(200 + n).standard_normal(groups * n).astype(np.float32) * 3 + np.float32(7.0)).tolist()
    _groups_as_torch_takes_them(welford_exe, x, n, torch_lanes, lanes, products)
