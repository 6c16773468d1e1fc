// kgen GEMM for a few rows (M <= 16: a batch of 1 to 16), z = x * w^T with x [M][K] and w [N][K]
// row-major, of T (fp32, or a 16-bit module's bf16 / fp16), on mma.sync's 16-row tiles: tf32x3
// for fp32 (the fp32-exact math of the wgmma GEMM, three products per element), one bf16 / fp16
// product for 16-bit operands; fp32 accumulators.
//
// Follows common.cuh and mma_detail.cuh (concatenated before this file): its MMAs and tf32 split,
// and the epilogue (tile_epilogue) that runs on the result. The wgmma GEMMs (gemm_wgmma_ws.cuh,
// gemm_wgmma_half.cuh) hand such products to it.
//
// Why: at a handful of rows a GEMM is a stream over w, and a wgmma warpgroup computes 64 rows:
// at 7 rows the tf32x3 wgmma GEMM did 9x the needed tensor-core work and an H100 took 0.158 ms
// at 7x8192->8192 against eager fp32's 0.182 ms. mma.sync's m16n8 tiles waste at most 16 / M,
// and w (256 MB there) is read once, straight from global memory into the MMAs' registers.
// (A first form on FMAs that read every x row from L1 for every 16 bytes of w ran at the rate of
// those x reads, 0.24 ms at 7 rows, 0.44 at 16: docs/perf.md.)
//
// Layout of the work: a CTA owns BN = 8 kBlocksN columns of z (rows of w) and all M rows; its
// kWarps warps split K (warp i takes k-blocks i, i + kWarps, ...: neighbouring warps read
// neighbouring bytes). In a k-block lane (g, q) = (lane / 4, lane % 4) loads 16 bytes at k =
// k-block * kBlockK + q kV of w's row 8j + g for each n-block j and of x's rows g and g + 8. The
// MMA's k slots q and q + 4 of step s (of two) are those 16 bytes' words 2s and 2s + 1, the same
// words in A's fragment (rows g, g + 8) as in B's (column g): a sum over k in another order
// than memory's, which a dot product does not mind. At the end the warps' partial tiles meet in
// shared memory in warp order (every call gives the same bits) and tile_epilogue runs the
// generated epilogue, BatchNorm's column statistics of the M rows and the store.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace kgen {

namespace skinny_detail {

// The m16n8k16 MMA of 16-bit operands T (bf16: mma_detail's), fp32 accumulators.
template <class T>
struct Mma16 {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_detail::mma_bf16(d, a, b);
  }
};
template <>
struct Mma16<__half> {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <class Gemm, class EPI, class T>
__global__ void __launch_bounds__(Gemm::kThreads)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, int M, int N, int K,
                  EpilogueParams p) {
  Gemm::template run<EPI>(x, w, M, N, K, p);
}

}  // namespace skinny_detail

template <class T>
struct SkinnyGemm {
  static constexpr int kMaxRows = 16;   // M at most this: one m16 tile
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlocksN = 4;    // n8 blocks per CTA: 16 bytes of x serve 4 of them
  static constexpr int BN = 8 * kBlocksN;
  static constexpr int kV = 16 / static_cast<int>(sizeof(T));  // elements in a lane's 16 bytes
  static constexpr int kBlockK = 4 * kV;                        // k per k-block (4 lanes' worth)
  static constexpr bool kSplit = std::is_same<T, float>::value;  // tf32x3
  // tf32x3: k-blocks per partial sum (64 k), then added to the fp32 accumulators: the tensor
  // cores truncate when they accumulate (gemm_wgmma.cuh).
  static constexpr int kFlush = 4;
  static constexpr int kLdt = BN + 4;

  // Whether this kernel computes the product: at most kMaxRows rows, x and w read 16 bytes at a
  // time (K a multiple of kV, both 16-byte aligned; otherwise the caller's own kernel).
  static bool applies(const T* x, const T* w, int M, int N, int K) {
    const auto aligned = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
    return M >= 1 && M <= kMaxRows && N >= 1 && K >= kV && K % kV == 0 && aligned(x) && aligned(w);
  }

  template <class EPI>
  static cudaError_t launch(const T* x, const T* w, int M, int N, int K, const EpilogueParams& p,
                            cudaStream_t stream) {
    const int blocks = N / BN + (N % BN != 0);
    skinny_detail::skinny_kernel<SkinnyGemm, EPI, T><<<blocks, kThreads, 0, stream>>>(x, w, M, N, K, p);
    return cudaGetLastError();
  }

  // ---- device side (public only so the __global__ wrapper can call it) ----
  __device__ static __forceinline__ uint4 load(const T* p, bool valid, bool streamed) {
    if (!valid) return make_uint4(0u, 0u, 0u, 0u);
    // w is read once (evict-first, past L1); x by every CTA (L1 and L2).
    return streamed ? __ldcs(reinterpret_cast<const uint4*>(p)) : __ldg(reinterpret_cast<const uint4*>(p));
  }
  __device__ static __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
  }

  template <class EPI>
  __device__ static __forceinline__ void run(const T* __restrict__ x, const T* __restrict__ w, int M,
                                             int N, int K, const EpilogueParams& p) {
    __shared__ __align__(16) float red[kWarps][kMaxRows][BN];
    __shared__ __align__(16) float tile[kMaxRows * kLdt];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int q = lane & 3;
    const int n0 = blockIdx.x * BN;
    const T* rows[kBlocksN];
    bool row_valid[kBlocksN];
#pragma unroll
    for (int j = 0; j < kBlocksN; ++j) {
      const int n = n0 + 8 * j + g;
      row_valid[j] = n < N;
      rows[j] = w + static_cast<size_t>(row_valid[j] ? n : 0) * K;
    }
    const bool xa_valid = g < M, xb_valid = g + 8 < M;
    const T* xa_row = x + static_cast<size_t>(xa_valid ? g : 0) * K;
    const T* xb_row = x + static_cast<size_t>(xb_valid ? g + 8 : 0) * K;

    float acc[kBlocksN][4], part[kBlocksN][4];  // part: tf32x3 only; otherwise eliminated
#pragma unroll
    for (int j = 0; j < kBlocksN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = part[j][e] = 0.f;
    }
    const int k_blocks = K / kBlockK + (K % kBlockK != 0);
    int since_flush = 0;
    // A lane's 16 bytes of x's rows g, g + 8 and of its w rows for k-block b. (K % kV == 0: the
    // 16 bytes are all in K or all out.)
    auto fetch = [&](int b, uint4& xa, uint4& xb, uint4 (&wv)[kBlocksN]) {
      const int k = b * kBlockK + q * kV;
      const bool in_k = b < k_blocks && k < K;
      xa = load(xa_row + k, xa_valid && in_k, false);
      xb = load(xb_row + k, xb_valid && in_k, false);
#pragma unroll
      for (int j = 0; j < kBlocksN; ++j) wv[j] = load(rows[j] + k, row_valid[j] && in_k, true);
    };
    // The next k-block's loads are issued before this one's MMAs: two blocks of w in flight per
    // warp (the loop is not unrolled, which kept a build 1-2 s shorter than unrolling by 2).
    uint4 xa, xb, wv[kBlocksN];
    fetch(warp, xa, xb, wv);
#pragma unroll 1
    for (int b = warp; b < k_blocks; b += kWarps) {
      uint4 next_xa, next_xb, next_wv[kBlocksN];
      fetch(b + kWarps, next_xa, next_xb, next_wv);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint32_t a[4] = {word(xa, 2 * s), word(xb, 2 * s), word(xa, 2 * s + 1), word(xb, 2 * s + 1)};
        if constexpr (kSplit) {
          uint32_t a_big[4], a_small[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) mma_detail::split_tf32(a[i], a_big[i], a_small[i]);
#pragma unroll
          for (int j = 0; j < kBlocksN; ++j) {
            uint32_t b_big[2], b_small[2];
            mma_detail::split_tf32(word(wv[j], 2 * s), b_big[0], b_small[0]);
            mma_detail::split_tf32(word(wv[j], 2 * s + 1), b_big[1], b_small[1]);
            mma_detail::mma_tf32(part[j], a_small, b_big);
            mma_detail::mma_tf32(part[j], a_big, b_small);
            mma_detail::mma_tf32(part[j], a_big, b_big);
          }
        } else {
#pragma unroll
          for (int j = 0; j < kBlocksN; ++j) {
            const uint32_t bw[2] = {word(wv[j], 2 * s), word(wv[j], 2 * s + 1)};
            skinny_detail::Mma16<T>::mma(acc[j], a, bw);
          }
        }
      }
      if constexpr (kSplit) {
        if (++since_flush == kFlush) {
          since_flush = 0;
#pragma unroll
          for (int j = 0; j < kBlocksN; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              acc[j][e] += part[j][e];
              part[j][e] = 0.f;
            }
          }
        }
      }
      xa = next_xa;
      xb = next_xb;
#pragma unroll
      for (int j = 0; j < kBlocksN; ++j) wv[j] = next_wv[j];
    }
    // The warp's partial tile (the accumulator layout: rows g and g + 8, columns 2q and 2q + 1
    // of each n-block), then the sum over the warps in warp order.
#pragma unroll
    for (int j = 0; j < kBlocksN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        red[warp][g + (e >= 2 ? 8 : 0)][8 * j + 2 * q + (e & 1)] = kSplit ? acc[j][e] + part[j][e] : acc[j][e];
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kMaxRows * BN; i += kThreads) {
      const int r = i / BN;
      const int c = i % BN;
      float t = red[0][r][c];
#pragma unroll
      for (int v = 1; v < kWarps; ++v) t += red[v][r][c];
      tile[r * kLdt + c] = t;
    }
    __syncthreads();
    tile_epilogue<kMaxRows, BN, kThreads, EPI>(tile, kLdt, 0, n0, M, N, p);
  }
};

}  // namespace kgen
