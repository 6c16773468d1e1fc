"""The staged backward's row kernel (kgen/lower/backward.py, BackwardRows) compiled for the host with
g++ and run by 64 threads with CUDA's barriers and reductions emulated (SHIMS), against
torch.autograd of the module itself: the gradient of z and of every parameter the epilogue
reads.

The modules' weight is set to the identity (in_features = out_features), so that z = x and
torch's dL/dx is dL/dz. Not here: BatchNorm (its per-column values come from the forward's
finalize); the GPU tier checks it (tests/test_backward_gpu.py), and every module end to end.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kgen.codegen.generator import CODEGEN_DIR
from kgen.lower import backward
from kgen.ir.graph import INPUT_PATH, input_index
from kgen.lower.forward import lower
from kgen.frontend.problems import graph, load

import host_builds
from conftest import SYNTHESIZED_REFS, module_source
from test_backward_gpu import ROW_PARAMETERS

# Row values of a detached reduction (its pass is skipped: no gradient reaches it) mixed with
# an active one, and alone; both once lost the gradient of the row value (review).
DETACHED_CASES = {
    "detached_max_after_sum": "x * (x.sum(dim=1, keepdim=True) * self.s + x.amax(dim=1, keepdim=True).detach())",
    "detached_max_alone": "x * (x.amax(dim=1, keepdim=True).detach() * self.s)",
}
# Groups of N / 2 = 512 elements, each summed by several warps (forward._split_group_pass; with
# the 2 warps here, one per group), and a softmax after them.
SPLIT_GROUP_CASES = {"split_groups": "x = torch.tanh(self.gn(x))",
                     "split_groups_softmax": "x = torch.softmax(self.gn(x) * 2.0, dim=1)"}
GXX = shutil.which("g++")
KERNELS = CODEGEN_DIR / "kernels"
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
M, N = 6, 1024   # N: a multiple of every GroupNorm's groups in tests/refs/

# CUDA's block and warp, emulated: T threads (std::thread) run the row function together,
# __syncthreads is a std::barrier, a block reduction gathers every thread's value, warp_sum its
# warp's; `__shared__` arrays become static locals, shared by the threads as on the GPU. A
# missing barrier shows up as a race (wrong sums), not only on the GPU.
SHIMS = r"""
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <thread>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
template <class T> inline T __ldg(const T* p) { return *p; }
typedef float kgen_operand_t;   // the fp32 build's
float rsqrtf(float);            // CUDA's, in the 16-bit branch only (never run here)
struct Index { unsigned x; };
constexpr int T = 64;
thread_local Index threadIdx{0};
Index blockDim{T};
std::barrier<>* block_barrier;
std::barrier<>* warp_barrier[T / 32];
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
namespace kgen {
@KERNEL_DECLARATIONS@
template <class T> inline float rounded_to_module(float v) { return v; }
// A 16-bit build's GroupNorm statistics (torch's Welford order): declared for the branch an fp32
// build discards (the row function is no template, so both branches must name things), never
// run here.
struct Welford { float mean = 0.f, m2 = 0.f, nf = 0.f; int n = 0; };
template <bool P = false> void welford_add(Welford&, float);
template <bool P = false> Welford welford_warp_reduce(Welford);
template <int L, bool P = false> Welford welford_lanes_reduce(Welford);
template <bool P = false> Welford welford_combine(Welford, const Welford&);
template <int W, int L, bool P = false> Welford welford_virtual_reduce(Welford (&)[W / L]);
inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }
inline float nan_min(float a, float b) { return (a < b || a != a) ? a : b; }
static float block_values[T], warp_values[T];
inline float block_reduce(float v, int kind) {
  __syncthreads();
  block_values[threadIdx.x] = v;
  __syncthreads();
  float r = kind == 0 ? 0.f : (kind == 1 ? -INFINITY : INFINITY);
  for (int i = 0; i < T; ++i) r = kind == 0 ? r + block_values[i] : (kind == 1 ? nan_max(r, block_values[i]) : nan_min(r, block_values[i]));
  __syncthreads();
  return r;
}
inline float block_sum(float v, float*) { return block_reduce(v, 0); }
inline float block_max(float v, float*) { return block_reduce(v, 1); }
inline float block_min(float v, float*) { return block_reduce(v, 2); }
// The sum over each segment of L lanes of a warp (L = 32: the warp's).
template <int L>
inline float lanes_sum(float v) {
  const int w = threadIdx.x / 32, first = threadIdx.x / L * L;
  warp_values[threadIdx.x] = v;
  warp_barrier[w]->arrive_and_wait();
  float r = 0.f;
  for (int i = 0; i < L; ++i) r += warp_values[first + i];
  warp_barrier[w]->arrive_and_wait();
  return r;
}
inline float warp_sum(float v) { return lanes_sum<32>(v); }
}
// body() on the T threads of one emulated CTA, threadIdx set and the block's and warps' barriers
// in place; returns when every thread has.
template <class Body>
void run_cta(Body body) {
  std::barrier<> block(T), warp0(32), warp1(32);
  block_barrier = &block;
  warp_barrier[0] = &warp0;
  warp_barrier[1] = &warp1;
  std::vector<std::thread> threads;
  for (int t = 0; t < T; ++t) threads.emplace_back([&, t] {
    threadIdx.x = t;
    body();
  });
  for (auto& t : threads) t.join();
}
"""

MAIN = r"""
// stdin: M N G P, z [M][N], g [M][G], then per operand its size and values (size 0: nullptr, a
// Dropout mask in eval mode).
// stdout: dz [M][N], the gradients the kernel adds to the inputs read per element (d_input's
// kMaxInputGradients slots, [M][N] each, a line each), then per operand its gradient (its contributions summed over the rows; a
// one-element operand's over the row too).
int main() {
  int M, N, G, P;
  if (scanf("%d %d %d %d", &M, &N, &G, &P) != 4) return 1;
  std::vector<float> z(M * N), g(M * G);
  for (auto& v : z) scanf("%f", &v);
  for (auto& v : g) scanf("%f", &v);
  kgen::EpilogueParams p{};
  p.N = N;
  int sizes[16];
  std::vector<std::vector<float>> operands(P);
  for (int k = 0; k < P; ++k) {
    scanf("%d", &sizes[k]);
    operands[k].resize(sizes[k]);
    for (auto& v : operands[k]) scanf("%f", &v);
    p.operand[k] = sizes[k] > 0 ? operands[k].data() : nullptr;
  }
  // Rows are added into plane rows R at a time, as the row kernel does beyond
  // kBackwardRowCtas rows (R = 4 of M = 6 rows: the last plane row has fewer).
  const int R = 4, plane_rows = (M + R - 1) / R;
  const size_t plane = static_cast<size_t>(plane_rows) * N;
  std::vector<float> dz(M * N), contrib((BackwardRows::kSlots + 1) * plane), cache(N), pool(2 * N);
  std::vector<std::vector<float>> dinputs(kgen::kMaxInputGradients, std::vector<float>(M * N));
  for (int s = 0; s < kgen::kMaxInputGradients; ++s) p.d_input[s] = dinputs[s].data();
  run_cta([&] {
    float scratch[32];
    for (int m = 0; m < M; ++m) {
      BackwardRows::row(z.data() + m * N, g.data() + m * G, dz.data() + m * N, contrib.data() + (m / R) * N, plane, m, N, p,
                        m % 2 ? cache.data() : nullptr, scratch, pool.data());   // both ways of reading the row
      __syncthreads();
    }
  });
  for (int i = 0; i < M * N; ++i) printf("%.9g ", dz[i]);
  printf("\n");
  for (const auto& dinput : dinputs) {
    for (int i = 0; i < M * N; ++i) printf("%.9g ", dinput[i]);
    printf("\n");
  }
  for (int k = 0; k < P; ++k) {
    int slot = -1;
    for (int s = 0; s < BackwardRows::kSlots; ++s) if (BackwardRows::kSlotOperand[s] == k) slot = s;
    for (int n = 0; n < sizes[k]; ++n) {
      double total = 0;
      for (int m = 0; m < plane_rows && slot >= 0; ++m)
        for (int c = (sizes[k] == 1 ? 0 : n); c < (sizes[k] == 1 ? N : n + 1); ++c) total += contrib[slot * plane + m * N + c];
      printf("%.9g ", total);
    }
    printf("\n");
  }
}
"""


def kernel_declarations() -> str:
    """The kernel library's declarations the row function uses, as the library writes them
    (kernels/common.cuh's EpilogueParams, operand count, input gradient slots and kinds of backward, backward.cuh's
    sizes)."""
    common = (KERNELS / "common.cuh").read_text()
    sizes = (KERNELS / "backward.cuh").read_text()
    return "\n".join([re.search(r"constexpr int kMaxOperands = \d+;", common).group(0),
                      re.search(r"constexpr int kMaxInputGradients = \d+;", common).group(0),
                      "using Operand = float;   // the fp32 build's (the harness runs its kernels)",
                      "using Param = float;",
                      "inline float as_float(float v) { return v; }",
                      "template <class T> inline void store_as(T* dst, float v) { *dst = v; }",
                      re.search(r"struct EpilogueParams \{.*?\n\};", common, re.S).group(0),
                      *re.findall(r"constexpr int kBackward\w+ = \d+;", common + sizes)])


def staged_without_finalize(ref: str) -> bool:
    low = lower(graph(ref, M, N, N).parts[-1], False, False)
    # (A broadcast tail's backward, which turns the output's gradient into the stages' first, is
    # checked on the host by tests/test_tail_backward.py. A pooling the GEMM's weight took
    # (rewrite.pool_as_weight) leaves a GEMM of another width than the identity weight here:
    # tests/test_pool_weight.py checks those gradients.)
    return (len(graph(ref, M, N, N).parts) == 1 and backward.unsupported(low) is None
            and backward.kind(low) == backward.KIND_STAGED and not low.batchnorm and not low.tail
            and low.graph.out_features == N)


REFS = [str(p) for p in SYNTHESIZED_REFS]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Paths of the modules written here, by name."""
    d = tmp_path_factory.mktemp("host_refs")
    texts = {"row_parameters": ROW_PARAMETERS,
             **{name: module_source(f"x = {e}", {"s": "nn.Parameter(torch.rand(1) + 0.5)"}, 32)
                for name, e in DETACHED_CASES.items()},
             **{name: module_source(body, {"gn": "nn.GroupNorm(2, out_features)"}, 32)
                for name, body in SPLIT_GROUP_CASES.items()}}
    for name, text in texts.items():
        (d / f"{name}.py").write_text(text)
    return {name: str(d / f"{name}.py") for name in texts}


def run_row_kernel(ref: str, tmp_path, training: bool = False, seed: int = 4, extras: tuple = ()):
    """(module, x, g, the kernel's dz plus its gradient of the module's input read per element (a
    residual: with the identity as weight, their sum is torch's dL/dx), its gradient of each
    parameter operand and of each input after x (get_inputs()' tensors `extras`, read per element:
    a residual, a gate; each from its slot of d_input) by path) for `ref` at M x N -> N with the
    identity as weight. A Dropout draws its mask in training mode (the
    oracle's draw right after torch.manual_seed(seed), which is the module's: the kernel reads
    it as an operand; rerun the module after the same seed to compare), none in eval mode."""
    low = lower(graph(ref, M, N, N).parts[0], False, False)
    source = SHIMS.replace("@KERNEL_DECLARATIONS@", kernel_declarations()) + backward.backward_struct(low).split("// (not used: no BatchNorm)")[0] + MAIN
    (tmp_path / "rows.cpp").write_text(source)
    build = host_builds.build(tmp_path / "rows.cpp", tmp_path / "rows")
    assert build.returncode == 0, build.stderr[-3000:]
    reference = load(ref, M, N, N)
    torch.manual_seed(0)
    model = reference.Model(*reference.init_args()).double().train(training)
    with torch.no_grad():
        model.get_parameter(low.graph.gemm.attrs["weight"]).copy_(torch.eye(N))
    x = torch.rand(M, N, dtype=torch.float64) * 2 - 1
    torch.manual_seed(seed)
    out = model(x, *extras)
    g = torch.randn(out.shape, dtype=torch.float64)
    torch.manual_seed(seed)
    with torch.no_grad():
        values = low.graph.part_values(x, model, extra_inputs=extras)
    params = dict(model.named_parameters())
    empty = torch.zeros(0, dtype=torch.float64)
    # A mask's value is mask * scale (training) or 1.0 (eval: the operand is nullptr).
    # The module's input read per element is x, an input after it its tensor of extras.
    operands = [(values[n.id] if isinstance(values[n.id], torch.Tensor) else empty) if n.kind == "mask"
                else ([x, *extras][input_index(n)]) if n.kind == "input" else params[n.attrs["path"]].detach()
                for n in low.operands]
    lines = [f"{M} {N} {g[0].numel() if g.dim() > 1 else 1} {len(operands)}",
             " ".join(map(repr, x.float().flatten().tolist())), " ".join(map(repr, g.float().flatten().tolist()))]
    lines += [f"{t.numel()} " + " ".join(map(repr, t.float().flatten().tolist())) for t in operands]
    run = subprocess.run([str(tmp_path / "rows")], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    rows = run.stdout.strip("\n").split("\n")
    slots = backward.max_input_gradients()
    dz, *d_inputs = (torch.tensor([float(v) for v in row.split()], dtype=torch.float64).reshape(M, N)
                     for row in rows[:1 + slots])
    grads = {n.attrs["path"]: torch.tensor([float(v) for v in row.split()], dtype=torch.float64)
             for n, row in zip(low.operands, rows[1 + slots:]) if n.kind == "param"}
    sent = backward.input_gradient_paths(low)
    assert all(torch.all(d == 0) for d in d_inputs[len(sent):])   # (the slots no input has: untouched)
    for path, d_input in zip(sent, d_inputs):
        if path == INPUT_PATH:
            dz = dz + d_input
        else:
            grads[path] = d_input.flatten()
    return model, x, g, dz, grads


@pytest.mark.parametrize("ref", [r for r in REFS if staged_without_finalize(r)] +
                         ["row_parameters", *DETACHED_CASES, *SPLIT_GROUP_CASES], ids=lambda r: r.rsplit("/", 1)[-1].removesuffix(".py"))
def test_row_kernel_gradients_match_autograd(ref, synthetic, tmp_path):
    check_row_kernel(synthetic.get(ref, ref), tmp_path, training=False)


def check_row_kernel(ref: str, tmp_path, training: bool, seed: int = 4, extras: tuple = ()):
    model, x, g, dz, grads = run_row_kernel(ref, tmp_path, training, seed, extras)
    x = x.clone().requires_grad_()
    extras = tuple(t.clone().requires_grad_() for t in extras)
    names = list(grads)
    leaves = [extras[int(p.strip("<>").split()[1]) - 1] if p.startswith("<input") else model.get_parameter(p)
              for p in names]
    torch.manual_seed(seed)   # (a Dropout in training mode draws the kernel's mask again)
    expected = torch.autograd.grad(model(x, *extras), [x] + leaves, g)
    scale = max(e.abs().max().item() for e in expected)
    torch.testing.assert_close(dz, expected[0], rtol=0, atol=2e-5 * scale, msg="dL/dz")
    for name, want in zip(names, expected[1:]):
        torch.testing.assert_close(grads[name], want.flatten(), rtol=0, atol=2e-5 * scale, msg=name)


@pytest.mark.parametrize("name", ["input_and_residual", "gate_then_norm", "bert_output", "detached_input_and_residual"])
def test_row_kernel_sends_each_input_read_per_element_its_gradient(name, tmp_path):
    """Inputs after x read per element before a norm (tests/test_second_input.py's spellings):
    the row kernel adds each one's gradient into its slot of d_input (backward.input_gradient_paths),
    the module's input's too, against torch.autograd of the fp64 module; the other slots untouched."""
    from test_second_input import module_file

    ref = module_file(tmp_path, name, in_features=N, out_features=N)
    low = lower(graph(ref, M, N, N).parts[0], False, False)
    assert staged_without_finalize(ref) and backward.unsupported(low) is None
    gen = torch.Generator().manual_seed(1)
    extras = tuple(torch.rand(M, N, generator=gen, dtype=torch.float64) * 2 - 1 for _ in load(ref, M, N, N).extra_inputs)
    check_row_kernel(ref, tmp_path, training=False, extras=extras)


def test_the_host_check_covers_every_row_kernel_path():
    """Reductions of tile and pooled values, max and avg pooling, softmax and logsumexp,
    GroupNorm: each appears in some module the test above runs."""
    lowered = [lower(graph(r, M, N, N).parts[0], False, False) for r in REFS if staged_without_finalize(r)]
    ops = {(n.kind, n.op, n.level) for low in lowered for n in low.graph.live()}
    assert {("pool", "max", "pooled"), ("pool", "avg", "pooled"), ("reduce", "sum", "rowflat"),
            ("reduce", "max", "row"), ("reduce", "sum", "row"), ("groupnorm", "", "tile")} <= ops


def _dropout_cases():
    from test_element_operands import DROPOUTS
    # The mask before a row reduction (read when the row is recomputed), after one (read in the
    # last pass), and a functional dropout before a row sum.
    return {"mask_before_softmax": DROPOUTS[1], "mask_after_mean": DROPOUTS[2], "functional_then_sum": DROPOUTS[4]}


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("case", [*_dropout_cases(), "gemm_dropout_scale_softmax"])
def test_row_kernel_gradients_through_dropout_masks(case, training, tmp_path):
    """The row kernel reads Dropout's mask (row m, column n) as the forward does and sends
    g * mask * scale back; in eval mode (no mask: nullptr) the dropout is the identity."""
    from conftest import REFS_DIR
    from test_element_operands import dropout_module

    ref = (REFS_DIR / f"{case}.py" if case == "gemm_dropout_scale_softmax"
           else dropout_module(tmp_path, _dropout_cases()[case]).path)
    low = lower(graph(str(ref), M, N, N).parts[0], False, False)
    assert any(n.kind == "mask" for n in low.operands) and backward.unsupported(low) is None
    assert backward.kind(low) == backward.KIND_STAGED
    check_row_kernel(str(ref), tmp_path, training)


def test_the_reverse_pass_drops_only_the_values_nothing_reads():
    """lower/backward.drop_unused_values: a declaration nothing reads goes, and then the ones only
    it read; a value read, or added to, stays; a block-wide reduction stays even unread (every
    thread must reach its barrier)."""
    from kgen.lower.backward import drop_unused_values

    lines = ["const float v3 = expf(s);", "const float v4 = ((v3) * (2.0f));", "const float v5 = ((s) + (1.0f));",
             "float a6 = 0.0f;  // the row value's gradient", "float a7 = 0.0f;", "a7 += v5;",
             "float r8 = kgen::block_sum(s, scratch);", "dst[n] = v5;"]
    assert drop_unused_values(lines) == [lines[2], lines[4], lines[5], lines[6], lines[7]]
