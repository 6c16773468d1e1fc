"""GPU tier of kernels/eager_sum.cuh, the row sums of the cuBLAS fp32 files: bit for bit
torch.sum's result (PyTorch's own CUDA reduction) wherever eager_sum_order models torch's
configuration, across the shapes that change it (the row split across warps or not, few rows
widening the block); within rounding of it where it does not. And an emitted
file end to end: a Linear without bias, a division, a row sum and a scale (the form of KernelBench
14, whose row sums cancel to near 0) in the cuBLAS fp32 variant equals eager's output exactly."""

import hashlib
from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.codegen import generator
from kgen.tune.search import Candidate
from kgen.tune.spec import Spec

from conftest import build_once

pytestmark = pytest.mark.gpu

# (M, N): wide rows split across the 16 warps (8192, 16384, 32768), rows a warp takes alone (256
# to 4096), few rows widening the block and splitting it in fewer warps (1, 3, 5, 7).
EXACT = [(1024, 8192), (128, 8192), (3, 8192), (16, 16384), (5, 32768), (1024, 4096), (7, 4096),
         (1, 4096), (2048, 1024), (1024, 256)]
# Not measured against torch (eager_sum_order sums in kgen's order): rows of fewer than 256
# columns, a vector tail (N % 4), a row split across blocks.
INEXACT = [(64, 31), (16, 100), (32, 132), (64, 1030), (2, 200000)]

KERNEL = r"""
__global__ void row_sums_kernel(const float* x, float* out, int M, int N, int eager) {
  __shared__ float scratch[32];
  const float* row = x + static_cast<size_t>(blockIdx.x) * N;
  float r;
  if (eager) {
    r = kgen::eager_row_sum(M, N, [&](int n) -> float { return row[n]; }, scratch);
  } else {  // kgen's own order (the other variants' row kernels), to show the test can fail
    float v = 0.f;
    for (int n = threadIdx.x; n < N; n += blockDim.x) v += row[n];
    r = kgen::block_sum(v, scratch);
  }
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}

torch::Tensor row_sums(torch::Tensor x, bool eager) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat);
  const int M = static_cast<int>(x.size(0)), N = static_cast<int>(x.size(1));
  auto out = torch::empty({M}, x.options());
  row_sums_kernel<<<M, kgen::kRowThreads>>>(x.data_ptr<float>(), out.data_ptr<float>(), M, N, eager);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  return out;
}
"""


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from torch.utils.cpp_extension import load_inline

    source = "".join(generator.kernel_source(f) for f in ("common.cuh", "stages.cuh", "eager_sum.cuh")) + KERNEL
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return load_inline(name=f"kgen_eager_sum_{digest}", cpp_sources="torch::Tensor row_sums(torch::Tensor x, bool eager);",
                       cuda_sources=source, functions=["row_sums"], extra_cuda_cflags=["-O3", "-std=c++17"],
                       build_directory=str(tmp_path_factory.mktemp("eager_sum")))


def _rows(M: int, N: int) -> torch.Tensor:
    # Terms of ~1e3 whose sums cancel: every order of them rounds differently.
    g = torch.Generator(device="cuda").manual_seed(M * 100003 + N)
    return torch.randn(M, N, device="cuda", generator=g) * 1e3


@pytest.mark.parametrize("M,N", EXACT)
def test_row_sums_are_torchs_to_the_bit(ext, M, N):
    x = _rows(M, N)
    expected = x.sum(-1)
    ours = ext.row_sums(x, True)
    assert torch.equal(ours, expected), (ours - expected).abs().max().item()


def test_another_order_is_not_torchs(ext):
    """kgen's usual order (512 threads, a butterfly) on the same rows: not torch's bits, so the
    test above tells orders apart."""
    x = _rows(1024, 8192)
    assert not torch.equal(ext.row_sums(x, False), x.sum(-1))


@pytest.mark.parametrize("M,N", INEXACT)
def test_configurations_not_modelled_still_sum_correctly(ext, M, N):
    x = _rows(M, N)
    exact = x.double().sum(-1)
    scale = x.double().abs().sum(-1)
    assert ((ext.row_sums(x, True).double() - exact).abs() <= 1e-5 * scale).all()


MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, factor):
        super().__init__()
        self.w = nn.Parameter(torch.randn(out_features, in_features))
        self.factor = factor

    def forward(self, x):
        y = torch.matmul(x, self.w.T) / 2
        return torch.sum(y, dim=1, keepdim=True) * self.factor


batch_size, in_features, out_features, factor = 256, 1024, 8192, 1.5


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, factor]
'''


def test_the_cublas_fp32_file_of_a_cancelling_row_sum_is_eagers_output(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    d = tmp_path_factory.mktemp("eager_sum_file")
    ref = d / "cancelling_sum.py"
    ref.write_text(MODULE)
    spec = Spec.of(str(ref), 256, 1024, 8192, math="fp32_simt", backend="cublas", fusion=1)
    path = generator.write(spec, d / f"{spec.name()}.py")
    assert "kgen::eager_row_sum(" in path.read_text()
    build_once(tmp_path_factory, "eager_sum_file", [Candidate(spec, path)], 1, 900, lambda line: None)
    f = EmittedFile(Path(path))
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = f.Model(*f.init_args())
        new = f.ModelNew(*f.init_args())
    new.load_state_dict(model.state_dict())
    for rows in (256, 7, 1000):
        x = torch.rand(rows, 1024, device="cuda")
        with torch.no_grad():
            expected, ours = model(x), new(x)
        assert torch.equal(ours, expected), (rows, (ours - expected).abs().max().item())
