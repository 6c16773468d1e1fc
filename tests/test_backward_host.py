"""The staged backward's row kernel (kgen/backward.py, BackwardRows) compiled for the host with
g++ and run row by row with one "thread" (blockDim.x = 1: every loop over a row runs whole and
a block reduction is the identity), against torch.autograd of the module itself: the gradient of
z and of every parameter the epilogue reads.

The modules' weight is set to the identity (in_features = out_features), so that z = x and
torch's dL/dx is dL/dz. Not here: GroupNorm (its passes run one warp per group, 32 lanes) and
BatchNorm (its per-column values come from the forward's finalize); the GPU tier checks both
(tests/test_backward_gpu.py), and every module end to end.
"""

import shutil
import subprocess

import pytest
import torch

from kgen import backward
from kgen.lower import lower
from kgen.problems import graph, load

from conftest import SYNTHESIZED_REFS
from test_backward_gpu import ROW_PARAMETERS

# Row values of a detached reduction (its pass is skipped: no gradient reaches it) mixed with
# an active one, and alone; both once lost the gradient of the row value (review).
DETACHED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.s = nn.Parameter(torch.rand(1) + 0.5)

    def forward(self, x):
        z = self.gemm(x)
        return {expression}


batch_size, in_features, out_features = 8, 16, 32


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
"""
DETACHED_CASES = {
    "detached_max_after_sum": "z * (z.sum(dim=1, keepdim=True) * self.s + z.amax(dim=1, keepdim=True).detach())",
    "detached_max_alone": "z * (z.amax(dim=1, keepdim=True).detach() * self.s)",
}
GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
M, N = 6, 1024   # N: a multiple of every GroupNorm's groups in tests/refs/

SHIMS = r"""
#include <cmath>
#include <cstddef>
#include <cstdio>
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
struct Index { int x; };
static Index threadIdx{0}, blockDim{1};
inline void __syncthreads() {}
namespace kgen {
struct EpilogueParams {
  float* z; float* part_mean; float* part_m2; const float* col_a; const float* col_c; const float* operand[16];
  const float* bn_xa; const float* bn_xc; const float* bn_gi; const float* bn_sum_y; const float* bn_sum_yx;
  int bn_training; float inv_batch;
};
inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }
inline float nan_min(float a, float b) { return (a < b || a != a) ? a : b; }
inline float block_sum(float v, float*) { return v; }
inline float block_max(float v, float*) { return v; }
inline float block_min(float v, float*) { return v; }
}
"""

MAIN = r"""
// stdin: M N G P, z [M][N], g [M][G], then per operand its size and values.
// stdout: dz [M][N], then per operand its gradient (its contributions summed over the rows; a
// one-element operand's over the row too).
int main() {
  int M, N, G, P;
  if (scanf("%d %d %d %d", &M, &N, &G, &P) != 4) return 1;
  float* z = new float[M * N];
  float* g = new float[M * G];
  for (int i = 0; i < M * N; ++i) scanf("%f", &z[i]);
  for (int i = 0; i < M * G; ++i) scanf("%f", &g[i]);
  kgen::EpilogueParams p{};
  int sizes[16];
  for (int k = 0; k < P; ++k) {
    scanf("%d", &sizes[k]);
    float* values = new float[sizes[k]];
    for (int i = 0; i < sizes[k]; ++i) scanf("%f", &values[i]);
    p.operand[k] = values;
  }
  const size_t plane = static_cast<size_t>(M) * N;
  float* dz = new float[M * N];
  float* contrib = new float[(BackwardRows::kSlots + 1) * plane]();
  float* pool = new float[2 * N]();
  float scratch[32];
  for (int m = 0; m < M; ++m)
    BackwardRows::row(z + m * N, g + m * G, dz + m * N, contrib + m * N, plane, N, p, nullptr, scratch, pool);
  for (int i = 0; i < M * N; ++i) printf("%.9g ", dz[i]);
  printf("\n");
  for (int k = 0; k < P; ++k) {
    int slot = -1;
    for (int s = 0; s < BackwardRows::kSlots; ++s) if (BackwardRows::kSlotOperand[s] == k) slot = s;
    for (int n = 0; n < sizes[k]; ++n) {
      double total = 0;
      for (int m = 0; m < M && slot >= 0; ++m)
        for (int c = (sizes[k] == 1 ? 0 : n); c < (sizes[k] == 1 ? N : n + 1); ++c) total += contrib[slot * plane + m * N + c];
      printf("%.9g ", total);
    }
    printf("\n");
  }
}
"""


def staged_without_warps_or_finalize(ref: str) -> bool:
    low = lower(graph(ref, M, N, N).parts[-1], False, False)
    return (len(graph(ref, M, N, N).parts) == 1 and backward.unsupported(low, False) is None
            and backward.kind(low) == backward.KIND_STAGED and not low.batchnorm
            and not any(n.kind == "groupnorm" for n in low.graph.live()))


REFS = [str(p) for p in SYNTHESIZED_REFS]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Paths of the modules written here, by name."""
    d = tmp_path_factory.mktemp("host_refs")
    texts = {"row_parameters": ROW_PARAMETERS,
             **{name: DETACHED.replace("{expression}", e) for name, e in DETACHED_CASES.items()}}
    for name, text in texts.items():
        (d / f"{name}.py").write_text(text)
    return {name: str(d / f"{name}.py") for name in texts}


def run_row_kernel(ref: str, tmp_path):
    """(module, x, g, the kernel's dz, its gradient of each operand by path) for `ref` at M x N
    -> N with the identity as weight."""
    low = lower(graph(ref, M, N, N).parts[0], False, False)
    source = SHIMS + backward.backward_struct(low).split("// (not used: no BatchNorm)")[0] + MAIN
    (tmp_path / "rows.cpp").write_text(source)
    build = subprocess.run([GXX, "-std=c++17", "-O1", "-o", str(tmp_path / "rows"), str(tmp_path / "rows.cpp")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr[-3000:]
    reference = load(ref, M, N, N)
    torch.manual_seed(0)
    model = reference.Model(*reference.init_args()).double().eval()   # Dropout: the identity
    with torch.no_grad():
        model.get_parameter(low.graph.gemm.attrs["weight"]).copy_(torch.eye(N))
    x = torch.rand(M, N, dtype=torch.float64) * 2 - 1
    out = model(x)
    g = torch.randn(out.shape, dtype=torch.float64)
    params = dict(model.named_parameters())
    operands = [params[n.attrs["path"]].detach() for n in low.operands]
    lines = [f"{M} {N} {g[0].numel() if g.dim() > 1 else 1} {len(operands)}",
             " ".join(map(repr, x.float().flatten().tolist())), " ".join(map(repr, g.float().flatten().tolist()))]
    lines += [f"{t.numel()} " + " ".join(map(repr, t.float().flatten().tolist())) for t in operands]
    run = subprocess.run([str(tmp_path / "rows")], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    rows = run.stdout.strip("\n").split("\n")
    dz = torch.tensor([float(v) for v in rows[0].split()], dtype=torch.float64).reshape(M, N)
    grads = {n.attrs["path"]: torch.tensor([float(v) for v in row.split()], dtype=torch.float64)
             for n, row in zip(low.operands, rows[1:])}
    return model, x, g, dz, grads


@pytest.mark.parametrize("ref", [r for r in REFS if staged_without_warps_or_finalize(r)] +
                         ["row_parameters", *DETACHED_CASES], ids=lambda r: r.rsplit("/", 1)[-1].removesuffix(".py"))
def test_row_kernel_gradients_match_autograd(ref, synthetic, tmp_path):
    ref = synthetic.get(ref, ref)
    model, x, g, dz, grads = run_row_kernel(ref, tmp_path)
    x = x.clone().requires_grad_()
    names = list(grads)
    expected = torch.autograd.grad(model(x), [x] + [model.get_parameter(p) for p in names], g)
    scale = max(e.abs().max().item() for e in expected)
    torch.testing.assert_close(dz, expected[0], rtol=0, atol=2e-5 * scale, msg="dL/dz")
    for name, want in zip(names, expected[1:]):
        torch.testing.assert_close(grads[name], want.flatten(), rtol=0, atol=2e-5 * scale, msg=name)


def test_the_host_check_covers_every_row_kernel_path():
    """Reductions of tile and pooled values, max and avg pooling, softmax and logsumexp, a
    one-element parameter at row level: each appears in some module the test above runs."""
    lowered = [lower(graph(r, M, N, N).parts[0], False, False) for r in REFS if staged_without_warps_or_finalize(r)]
    ops = {(n.kind, n.op, n.level) for low in lowered for n in low.graph.live()}
    assert {("pool", "max", "pooled"), ("pool", "avg", "pooled"), ("reduce", "sum", "rowflat"),
            ("reduce", "max", "row"), ("reduce", "sum", "row")} <= ops
