"""Session 50, call F: writes split_bench.cu, the split pass of x's rows as two commits' kernels
have it, side by side: session 49's f16x3_split_kernel (OLD: x and w in one launch) against
session 50's f16x3_split_kernel<false> (NEW) and a variant of NEW whose held rows take their
padding quads as zeros, with no branch (t1). Each kernel is cut from that commit's
kgen/codegen/kernels/gemm_wgmma_f16x3.cuh (the f16x3_detail namespace up to scale_back) into a
namespace of its own, so nothing of the kernels is written here. Timed on x 16384 x 4096
(KernelBench 39) and 1024 x 8192 (12), CUDA events over 20 launches after 3.

    python3 docs/experiments/s50/split_bench.py 34ca91c 3bd617c > /tmp/split_bench.cu
    nvcc -O3 -gencode=arch=compute_90a,code=sm_90a /tmp/split_bench.cu -o /tmp/split_bench && /tmp/split_bench
"""
import subprocess
import sys

KERNELS = "kgen/codegen/kernels/gemm_wgmma_f16x3.cuh"

HARNESS = r"""template <class F> float time_it(F launch) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) launch();
  cudaEventRecord(a); for (int i = 0; i < 20; ++i) launch(); cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b); return ms / 20 * 1000;
}
int main() {
  const int shapes[2][2] = {{16384, 4096}, {1024, 8192}};
  for (auto& s : shapes) {
    const int M = s[0], K = s[1];
    float* x; __half *hi, *lo; int* shift;
    cudaMalloc(&x, 4LL * M * K); cudaMalloc(&hi, 2LL * M * K); cudaMalloc(&lo, 2LL * M * K); cudaMalloc(&shift, 4 * M);
    cudaMemset(x, 0x3c, 4LL * M * K);
    const int T = 256;
    float o = time_it([&] { old_k::kgen::f16x3_detail::f16x3_split_kernel<<<M, T>>>(x, M, nullptr, K, hi, lo, shift, nullptr, nullptr, nullptr); });
    float n = time_it([&] { new_k::kgen::f16x3_detail::f16x3_split_kernel<false><<<M, T>>>(x, K, hi, lo, shift, nullptr); });
    float t = time_it([&] { t1_k::kgen::f16x3_detail::f16x3_split_kernel<false><<<M, T>>>(x, K, hi, lo, shift, nullptr); });
    printf("| %d x %d | old %.1f us | new %.1f us | t1 %.1f us |\n", M, K, o, n, t);
    cudaFree(x); cudaFree(hi); cudaFree(lo); cudaFree(shift);
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
"""


def kernels(source: str, namespace: str) -> str:
    start, end = source.index("namespace f16x3_detail {"), source.index("// v 2^-(sx + sw)")
    return f"namespace {namespace} {{ namespace kgen {{\n{source[start:end]}}}  // f16x3_detail\n}}}}  // kgen, {namespace}\n"


def main(old_rev: str, new_rev: str) -> None:
    old, new = (subprocess.check_output(["git", "show", f"{rev}:{KERNELS}"], text=True) for rev in (old_rev, new_rev))
    t1 = new.replace("if (i < quads) take(held[r], i);", "if (!kHash || i < quads) take(held[r], i);")
    assert t1 != new, "the held row's padding branch is not where t1 expects it"
    sys.stdout.write(f"// Written by docs/experiments/s50/split_bench.py {old_rev} {new_rev}.\n"
                     "#include <cstdio>\n#include <cuda_fp16.h>\n#include <stdint.h>\n"
                     + kernels(old, "old_k") + kernels(new, "new_k") + kernels(t1, "t1_k") + HARNESS)


if __name__ == "__main__":
    main(*sys.argv[1:])
