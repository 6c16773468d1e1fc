"""Session 53: x's split pass at rows of 1024-8192, the kernels side by side. Writes a CUDA file
that cuts the f16x3_detail namespace out of the working tree's kgen/codegen/kernels/
gemm_wgmma_f16x3.cuh (nothing of the kernels is written here) and, by text substitution only:
- `block`: f16x3_split_kernel<false>, a block a row (the reference: every other variant's hi, lo
  and shift must equal its bytes);
- `block_lb6` / `block_lb8`: the same kernel with __launch_bounds__(256, 6 / 8) (fewer registers,
  more rows in flight an SM); `block_h4`: the same kernel holding 4 quads a thread, not 8 (K <= 4096
  held, longer rows read twice);
- `warp<H, T>`: f16x3_split_short_rows_kernel<H> (a warp a row, H quads a lane: K <= 128 H) with
  blocks of T threads.
Timed at KernelBench 37's, 45's, 39's and 12's x (CUDA events, 20 launches after 3), x random.

    python3 docs/experiments/s53/split_rows_bench.py > /tmp/srb.cu
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a /tmp/srb.cu -o /tmp/srb && /tmp/srb
"""
import sys

KERNELS = "kgen/codegen/kernels/gemm_wgmma_f16x3.cuh"

HARNESS = r"""
#include <vector>
#include <cstring>
template <class F> float time_it(F launch) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) launch();
  cudaEventRecord(a); for (int i = 0; i < 20; ++i) launch(); cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b); return ms / 20 * 1000;
}
__global__ void fill(float* x, long long n) {
  long long i = blockIdx.x * 256LL + threadIdx.x;
  if (i < n) { unsigned h = (unsigned)(i * 2654435761u) ^ (unsigned)(i >> 7); x[i] = ((h % 20001) - 10000) * 1e-3f * (1 + (h >> 28)); }
}
struct Out { __half *hi, *lo; int* shift; };
int main() {
  const int shapes[][2] = {{32768, 1024}, {16384, 2048}, {16384, 4096}, {1024, 8192}};
  for (auto& s : shapes) {
    const int M = s[0], K = s[1];
    const long long n = 1LL * M * K;
    float* x; cudaMalloc(&x, 4 * n);
    fill<<<(n + 255) / 256, 256>>>(x, n);
    Out ref, o;
    for (Out* p : {&ref, &o}) { cudaMalloc(&p->hi, 2 * n); cudaMalloc(&p->lo, 2 * n); cudaMalloc(&p->shift, 4 * M); }
    using namespace kgen::f16x3_detail;
    auto block = [&](Out& d) { f16x3_split_kernel<false><<<M, 256>>>(x, K, d.hi, d.lo, d.shift, nullptr); };
    block(ref);
    std::vector<char> a(2 * n), b(2 * n);
    auto same = [&]() {
      cudaDeviceSynchronize();
      bool ok = true;
      for (int part = 0; part < 2; ++part) {
        cudaMemcpy(a.data(), part ? ref.lo : ref.hi, 2 * n, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), part ? o.lo : o.hi, 2 * n, cudaMemcpyDeviceToHost);
        ok = ok && !memcmp(a.data(), b.data(), 2 * n);
      }
      cudaMemcpy(a.data(), ref.shift, 4 * M, cudaMemcpyDeviceToHost);
      cudaMemcpy(b.data(), o.shift, 4 * M, cudaMemcpyDeviceToHost);
      return ok && !memcmp(a.data(), b.data(), 4 * M);
    };
    const double gb = 8.0 * n / 1e3;   // bytes moved / 1e3 = GB/s * us
    auto row = [&](const char* name, auto launch) {
      cudaMemset(o.hi, 0, 2 * n); cudaMemset(o.lo, 0, 2 * n); cudaMemset(o.shift, 0xff, 4 * M);
      launch(o);
      bool ok = same();
      float us = time_it([&] { launch(o); });
      printf("| %d x %d | %s | %.1f us | %.0f GB/s | %s |\n", M, K, name, us, gb / us, ok ? "same bytes" : "DIFFERENT");
    };
    row("block", block);
    row("block_lb6", [&](Out& d) { lb6::kgen::f16x3_detail::f16x3_split_kernel<false><<<M, 256>>>(x, K, d.hi, d.lo, d.shift, nullptr); });
    row("block_h4", [&](Out& d) { h4::kgen::f16x3_detail::f16x3_split_kernel<false><<<M, 256>>>(x, K, d.hi, d.lo, d.shift, nullptr); });
    row("block_lb8", [&](Out& d) { lb8::kgen::f16x3_detail::f16x3_split_kernel<false><<<M, 256>>>(x, K, d.hi, d.lo, d.shift, nullptr); });
#define WARP(H, T) if (K <= 128 * H) row("warp<" #H ", " #T ">", [&](Out& d) { \
      wt::kgen::f16x3_detail::f16x3_split_short_rows_kernel<H, T><<<(M + T / 32 - 1) / (T / 32), T>>>(x, M, K, d.hi, d.lo, d.shift); });
    WARP(8, 256) WARP(16, 256) WARP(16, 128) WARP(16, 64) WARP(32, 128) WARP(32, 64) WARP(32, 32)
    cudaFree(x);
    for (Out* p : {&ref, &o}) { cudaFree(p->hi); cudaFree(p->lo); cudaFree(p->shift); }
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
"""


def cut(source: str) -> str:
    start, end = source.index("namespace f16x3_detail {"), source.index("// v 2^-(sx + sw)")
    return source[start:end]


def wrapped(body: str, namespace: str | None) -> str:
    inner = f"namespace kgen {{\n{body}}}  // f16x3_detail\n}}  // kgen\n"
    return inner if namespace is None else f"namespace {namespace} {{\n{inner}}}  // {namespace}\n"


def main() -> None:
    body = cut(open(KERNELS).read())
    old_bounds = "__global__ void __launch_bounds__(kSplitThreads)\n    f16x3_split_kernel("
    assert old_bounds in body, "the block kernel's launch bounds are not where the bench expects them"
    lb = {k: body.replace(old_bounds, old_bounds.replace("(kSplitThreads)", f"(kSplitThreads, {k})")) for k in (6, 8)}
    held = "constexpr int kHeldQuads = 8;"
    assert held in body, "the block kernel's held quads are not where the bench expects them"
    h4 = body.replace(held, "constexpr int kHeldQuads = 4;")
    head = "template <int kHeld>\n__global__ void __launch_bounds__(kSplitThreads)\n    f16x3_split_short_rows_kernel("
    assert head in body, "apply docs/experiments/s52/short_rows_2048.patch first (the templated warp kernel)"
    start = body.index(head)
    end = body.index("inline cudaError_t split_x(")
    warp = body[start:end]
    warp_t = (warp.replace("template <int kHeld>\n__global__ void __launch_bounds__(kSplitThreads)",
                           "template <int kHeld, int kThreads>\n__global__ void __launch_bounds__(kThreads)")
              .replace("(kSplitThreads / 32)", "(kThreads / 32)"))
    assert warp_t.count("kThreads") == 3, "the warp kernel's block size is not where the bench expects it"
    wt = body[:start] + warp_t + "}  // (split_x left out)\n"
    wt = wt[:wt.rindex("}  // (split_x left out)\n")]
    sys.stdout.write("// Written by docs/experiments/s53/split_rows_bench.py.\n#include <cstdio>\n#include <cuda_fp16.h>\n"
                     "#include <cuda_runtime.h>\n#include <stdint.h>\n"
                     + wrapped(body, None) + wrapped(lb[6], "lb6") + wrapped(lb[8], "lb8") + wrapped(h4, "h4") + wrapped(wt, "wt") + HARNESS)


if __name__ == "__main__":
    main()
