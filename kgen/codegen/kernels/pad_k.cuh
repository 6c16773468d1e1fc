// The K pad of a GEMM part whose GEMM reads x and w by TMA, the wgmma family's
// (generator.PART_LIBRARY inlines this file after entry.cuh in such a part's namespace alone, and
// its kgen_forward_<part> calls pad_k first): x and w copied into the workspace's end with zero
// columns to entry.cuh's gemm_k, where the rule, the layout and the reasons stand.
#pragma once

namespace kgen {

// Element (row, col) of the copies [rows_x + rows_w][k] (x's rows, then w's) from the rows of K
// elements: the bits copied (NaN's too), zeros past K. Words of the elements' size: no arithmetic
// on them.
template <class XWord, class WWord>
__host__ __device__ __forceinline__ void pad_k_element(long long row, int col, const XWord* x, const WWord* w,
                                                       XWord* px, WWord* pw, long long rows_x, int K, int k) {
  if (row < rows_x) {
    px[row * k + col] = col < K ? x[row * K + col] : XWord(0);
  } else {
    const long long r = row - rows_x;
    pw[r * k + col] = col < K ? w[r * K + col] : WWord(0);
  }
}
// A CTA per row (no division per element), its threads along the row.
template <class XWord, class WWord>
__global__ void pad_k_kernel(const XWord* x, const WWord* w, XWord* px, WWord* pw, long long rows_x, long long rows,
                             int K, int k) {
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    for (int col = threadIdx.x; col < k; col += blockDim.x) pad_k_element(row, col, x, w, px, pw, rows_x, K, k);
  }
}
template <class T>
using Word = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned int>;
// Where gemm_k pads: x and w copied (one launch on a's stream), and a made to read the copies at
// the padded K. The caller sized the workspace by workspace_floats.
// (A template, so that a part that runs no GEMM of its own, kPadsK false there, instantiates no
// pad kernel.)
template <bool kPads = kPadsK>
const char* pad_k(kgen_cfg::ForwardArgs& a) {
  if constexpr (!kPads) {
    (void)a;
    return nullptr;
  } else {
    const int k = gemm_k(a.K);
    if (k == a.K) return nullptr;
    float* const base = a.workspace + padded_offset(a.M, a.N, a.K);
    auto* const px = reinterpret_cast<Operand*>(base);
    auto* const pw = reinterpret_cast<kgen_weight_t*>(base + padded_floats<Operand>(a.M, k));
    const long long rows = static_cast<long long>(a.M) + a.N;
    if (rows > 0) {
      const int threads = k >= 256 ? 256 : 32;
      pad_k_kernel<<<static_cast<int>(std::min<long long>(rows, 1LL << 20)), threads, 0, static_cast<cudaStream_t>(a.stream)>>>(
          reinterpret_cast<const Word<Operand>*>(a.x), reinterpret_cast<const Word<kgen_weight_t>*>(a.w),
          reinterpret_cast<Word<Operand>*>(px), reinterpret_cast<Word<kgen_weight_t>*>(pw), a.M, rows, a.K, k);
      const cudaError_t launched = cudaGetLastError();
      if (launched != cudaSuccess) return cudaGetErrorString(launched);
    }
    a.x = px;
    a.w = pw;
    a.K = k;
    return nullptr;
  }
}

}  // namespace kgen
