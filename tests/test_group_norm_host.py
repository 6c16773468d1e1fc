"""The forward row function of GroupNorm modules on the host (g++, with tests/test_backward_host.py's
emulated CTA: threads as std::threads, barriers, a warp's lanes), against torch's GroupNorm in fp64:
at the width the module was traced at, where the row function takes the groups' size as a constant
(kAtTracedWidth) and groups of at most 16 elements in segments of a warp; and at other widths (the
reference's constructor at another out_features runs the same file), where the size is computed and
a segment's lanes may each take several elements of a group, or share a group with the next."""

import subprocess
from pathlib import Path

import pytest
import torch

import host_builds
from conftest import module_source
from kgen.frontend.problems import graph, load
from kgen.lower.forward import lower
from test_backward_host import GXX, SHIMS, kernel_declarations

pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
M, IN, TRACED = 3, 8, 64

# What the forward row function calls beyond the backward's (SHIMS): the copy of a row into
# `cache` by the CTA's threads, and the output's store (fp32).
FORWARD_SHIMS = r"""
#include <type_traits>
namespace kgen {
inline void copy_row(const float* src, float* dst, int N) {
  for (int n = threadIdx.x; n < N; n += blockDim.x) dst[n] = src[n];
}
template <class T> struct OutputType;
template <> struct OutputType<float> { static float one(float v) { return v; } };
}
"""

def row_main(one: str, zero: str) -> str:
    """A main() that runs EvalStage2's forward row function over M rows in the emulated CTA:
    argv[1] 1 runs the row function as `one` names it (its template arguments: cached, Out, at the
    traced width), 0 as `zero`. stdin: M N W P, S [M][N], then per operand its size and values (W:
    the output's width). stdout: the output [M][W]. The row's shared-memory copy starts as NaN, so
    a read of it before it is written shows."""
    call = "EvalStage2::row<{}>(s.data() + m * N, out.data() + m * W, m, N, p, cache.data(), scratch);"
    return r"""
int main(int argc, char** argv) {
  const bool one = argc > 1 && argv[1][0] == '1';
  int M, N, W, P;
  if (scanf("%d %d %d %d", &M, &N, &W, &P) != 4) return 1;
  std::vector<float> s(M * N), out(M * W), cache(N, std::nanf(""));
  for (auto& v : s) scanf("%f", &v);
  kgen::EpilogueParams p{};
  p.N = N;
  std::vector<std::vector<float>> operands(P);
  for (int k = 0; k < P; ++k) {
    int size;
    scanf("%d", &size);
    operands[k].resize(size);
    for (auto& v : operands[k]) scanf("%f", &v);
    p.operand[k] = operands[k].data();
  }
  run_cta([&] {
    float scratch[32];
    for (int m = 0; m < M; ++m) {
      if (one) {
        """ + call.format(one) + """
      } else {
        """ + call.format(zero) + """
      }
      __syncthreads();
    }
  });
  for (int i = 0; i < M * W; ++i) printf("%.9g ", out[i]);
  printf("\\n");
}
"""


# argv[1]: 1 for the row function's code at the traced width (kAtTracedWidth), 0 the general.
MAIN = row_main("true, float, true", "true, float, false")


def build_row_function(stage2_cuda: str, main: str, exe: Path) -> Path:
    """A part's stage-2 struct (its forward row function) with `main` (row_main's), built on the
    host with the emulated CTA into `exe`."""
    source = (SHIMS.replace("@KERNEL_DECLARATIONS@", kernel_declarations()) + FORWARD_SHIMS
              + "using namespace kgen;\n" + stage2_cuda + main)
    exe.with_suffix(".cpp").write_text(source)
    build = host_builds.build(exe.with_suffix(".cpp"), exe)
    assert build.returncode == 0, build.stderr[-3000:]
    return exe


def run_row_function(exe: Path, one: bool, s: torch.Tensor, operands: list, width: int) -> torch.Tensor:
    """The row function's output [M][width] from S [M][N] and the operands' values (fp32 flat
    tensors), run as row_main's `one` (True) or `zero` call names it."""
    lines = [f"{s.shape[0]} {s.shape[1]} {width} {len(operands)}", " ".join(map(repr, s.flatten().tolist()))]
    lines += [f"{t.numel()} " + " ".join(map(repr, t.tolist())) for t in operands]
    run = subprocess.run([str(exe), "1" if one else "0"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return torch.tensor([float(v) for v in run.stdout.split()], dtype=torch.float64).reshape(s.shape[0], width)

# GroupNorm(groups) traced at 64 features: groups of 32 (a warp each), 16 and 4 (segments of 16
# and 4 lanes), 1 (segments of one lane); then a point-wise op after it.
GROUPS = [2, 4, 16, 64]


def oracle_case(ref, low, stored: int, M: int, IN: int, width: int, perturb: bool = False):
    """The reference at `width` in fp64 (its parameters drawn from randn where `perturb`: a
    GroupNorm's affine away from (1, 0)) on one input: S (the IR's value `stored`, as the row
    function reads it), the part's operands in its order, and the module's output."""
    reference = load(ref, M, IN, width)
    torch.manual_seed(0)
    model = reference.Model(*reference.init_args()).double().eval()
    if perturb:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p))
    x = torch.randn(M, IN, dtype=torch.float64) * 3
    with torch.no_grad():
        values = low.graph.part_values(x, model)
        expected = model(x)
    params = dict(model.named_parameters())
    operands = [params[n.attrs["path"]].detach().float().flatten() for n in low.operands]
    return values[stored].float(), operands, expected


@pytest.fixture(scope="module")
def exes(tmp_path_factory):
    """Per group count: the module's path and the executable of its eval row function, traced
    at TRACED features."""
    d = tmp_path_factory.mktemp("gn_host")
    built = {}
    for groups in GROUPS:
        ref = d / f"gn{groups}.py"
        ref.write_text(module_source("x = self.gn(x)\nx = torch.tanh(x)", {"gn": f"nn.GroupNorm({groups}, out_features)"},
                                     TRACED))
        low = lower(graph(str(ref), M, IN, TRACED).parts[0], False, False)
        struct = low.eval.stage2_cuda
        assert "kAtTracedWidth ?" in struct, "the traced width's group size as a constant"
        built[groups] = (str(ref), build_row_function(struct, MAIN, d / f"gn{groups}"))
    return built


@pytest.mark.parametrize("width, at_traced", [(TRACED, True), (TRACED, False), (2 * TRACED, False),
                                              (TRACED // 2, False)],
                         ids=["traced", "traced-general", "wider", "narrower"])
@pytest.mark.parametrize("groups", GROUPS)
def test_group_norm_rows_match_torch(exes, groups, width, at_traced):
    """The row function's output from S (GroupNorm's input), per row, within fp32 rounding of
    torch's fp64 GroupNorm and tanh: at the traced width both of its codes, and at widths the file
    was not traced at (the constructor's out_features changed) the general one."""
    if width % groups:
        pytest.skip("GroupNorm needs the width divisible by its groups")
    ref, exe = exes[groups]
    traced_low = lower(graph(ref, M, IN, TRACED).parts[0], False, False)
    low = lower(graph(ref, M, IN, width).parts[0], False, False)   # the same operands, at `width`
    assert [n.attrs.get("path") for n in low.operands] == [n.attrs.get("path") for n in traced_low.operands]
    s, operands, expected = oracle_case(ref, low, traced_low.eval.stored, M, IN, width, perturb=True)
    out = run_row_function(exe, at_traced, s, operands, width)
    assert torch.allclose(out, expected, atol=2e-5, rtol=1e-5), (out - expected).abs().max().item()
