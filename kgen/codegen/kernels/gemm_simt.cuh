// kgen SIMT GEMM mainloop: z = x * w^T in fp32 with FFMA only (no tensor cores).
//
// x [M][K] and w [N][K] are both K-major, so a tile row of either operand is contiguous in
// global memory while the outer product wants contiguous runs of M (resp. N) for one k. Each
// k-tile therefore travels global -> registers -> shared memory, transposed on the way into
// [BK][rows + 4] so that the inner loop reads each thread's fragment with 128-bit loads.
// Two shared-memory stages and a register-staged prefetch of the next k-tile overlap the global
// loads with the FFMAs; one __syncthreads() per k-tile.
//
// Assumes common.cuh (the epilogue contract, EpilogueParams, tile_epilogue, raster_tile) precedes this file.
#pragma once
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>

namespace kgen {
namespace simt_detail {

// Moves one operand's ROWS x BK k-tile. The unit of work is 8 consecutive k of one row: one
// 32-byte sector, so every global request uses whole sectors. A unit is covered by 2 threads
// with float4 loads (kVec) or 8 threads with scalar loads; consecutive lanes take the units of
// consecutive rows. With the shared row pitch ROWS + 4 (== 4 mod 8 when ROWS % 16 == 0) the
// transposed scalar stores of one warp land in 32 distinct banks in both modes.
template <int ROWS, int BK, int NTHREADS, bool kVec>
struct TileLoader {
  static constexpr int kWidth = kVec ? 4 : 1;
  static constexpr int kThreadsPerUnit = 8 / kWidth;
  static constexpr int kUnitsPerPass = NTHREADS / kThreadsPerUnit;
  static constexpr int kLoads = ROWS * BK / (NTHREADS * kWidth);
  static constexpr int kLd = ROWS + 4;
  static_assert(kLoads >= 1 && kLoads * NTHREADS * kWidth == ROWS * BK,
                "each thread must move a whole number of float4 per operand k-tile: "
                "ROWS * BK must be a multiple of 4 * kThreads");
  static_assert(ROWS % kUnitsPerPass == 0 || kUnitsPerPass % ROWS == 0,
                "the loader's sweep of kThreads/2 (vector) or kThreads/8 (scalar) rows must divide "
                "or be divisible by BM and BN, so that per-load offsets are compile-time");

  // The j-th load of a thread sits a compile-time (row, k) offset away from its first one
  // (given the divisibility above), so only one base pointer lives in registers.
  static constexpr __host__ __device__ int row_step(int j) { return (j * kUnitsPerPass) % ROWS; }
  static constexpr __host__ __device__ int k_step(int j) { return 8 * ((j * kUnitsPerPass) / ROWS); }

  // Kept as running quantities so the per-tile bounds tests are one compare against a
  // compile-time step each, and little state stays live across the mainloop.
  const float* src;  // this thread's first element of the next k-tile to load
  int k_left;        // K minus this thread's first k of the next k-tile
  int rows_left;     // valid rows of the tile minus this thread's first row
  int ld;            // K, the global row pitch
  int s_off;         // shared offset of this thread's first element within a stage
  float regs[kLoads * kWidth];

  __device__ __forceinline__ TileLoader(const float* mat, int rows_total, int K, int row0,
                                        int tid) {
    const int unit = tid / kThreadsPerUnit;
    const int row = unit % ROWS;
    const int k = (unit / ROWS) * 8 + (tid % kThreadsPerUnit) * kWidth;
    src = mat + static_cast<size_t>(row0 + row) * K + k;
    k_left = K - k;
    rows_left = min(ROWS, rows_total - row0) - row;
    ld = K;
    s_off = k * kLd + row;
  }

  // Registers <- the next k-tile, zero outside the matrix so the FFMAs on the padding add
  // nothing. With K % 4 == 0 a float4 never straddles the K edge.
  __device__ __forceinline__ void load() {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const bool ok = row_step(j) < rows_left && k_step(j) < k_left;
      const float* g = src + static_cast<size_t>(row_step(j)) * ld + k_step(j);
      if constexpr (kVec) {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) v = __ldg(reinterpret_cast<const float4*>(g));
        regs[4 * j + 0] = v.x;
        regs[4 * j + 1] = v.y;
        regs[4 * j + 2] = v.z;
        regs[4 * j + 3] = v.w;
      } else {
        regs[j] = ok ? __ldg(g) : 0.f;
      }
    }
    src += BK;
    k_left -= BK;
  }

  // Registers -> shared stage, transposed to [BK][kLd].
  __device__ __forceinline__ void store(float* s) const {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
#pragma unroll
      for (int c = 0; c < kWidth; ++c) {
        s[s_off + (k_step(j) + c) * kLd + row_step(j)] = regs[j * kWidth + c];
      }
    }
  }
};

}  // namespace simt_detail

template <class G, bool kVec, class EPI>
__global__ void __launch_bounds__(G::kThreads, G::kMinBlocks)
    simt_gemm_kernel(const float* __restrict__ x, const float* __restrict__ w, int M, int N,
                     int K, EpilogueParams p) {
  G::template run<kVec, EPI>(x, w, M, N, K, p);
}

// CTA tile BM x BN, warp tile WM x WN, thread tile TM x TN, BK k per shared stage.
// A thread's TM rows are TM/4 float4 chunks spaced 4 * (WM/TM) apart (likewise its TN columns),
// so for one k the lanes of a warp read contiguous, distinct 16-byte words: conflict-free, and
// each chunk load is one shared-memory wavefront.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int GROUP_M>
struct SimtGemm {
  static constexpr int kWarpsM = BM / WM;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kLanesM = WM / TM;  // lanes of a warp along M
  static constexpr int kLanesN = WN / TN;  // lanes of a warp along N

  static constexpr int kLdA = BM + 4;     // shared pitch of the transposed x tile [BK][kLdA]
  static constexpr int kLdB = BN + 4;     // shared pitch of the transposed w tile [BK][kLdB]
  static constexpr int kLdTile = BN + 4;  // epilogue tile [BM][kLdTile]
  static constexpr int kStageFloats = BK * (kLdA + kLdB);
  static constexpr int kMainloopBytes = 2 * kStageFloats * 4;
  static constexpr int kEpilogueBytes = BM * kLdTile * 4;
  static constexpr int kSmemBytes =
      kMainloopBytes > kEpilogueBytes ? kMainloopBytes : kEpilogueBytes;

  // Register budget per thread: 128 keeps two 256-thread CTAs per SM for an 8x8 thread tile;
  // larger thread tiles need the whole 255 and run one CTA per SM.
  static constexpr int kRegBudget = TM * TN <= 64 ? 128 : 255;
  static constexpr int kMinBlocks =
      65536 / (kThreads * kRegBudget) > 0 ? 65536 / (kThreads * kRegBudget) : 1;

  static_assert(BM > 0 && BN > 0 && BK > 0 && WM > 0 && WN > 0 && TM > 0 && TN > 0,
                "tile sizes must be positive");
  static_assert(GROUP_M >= 1, "GROUP_M must be >= 1");
  static_assert(BM % WM == 0 && BN % WN == 0, "the CTA tile must be a whole number of warp tiles");
  static_assert(WM % TM == 0 && WN % TN == 0,
                "the warp tile must be a whole number of thread tiles");
  static_assert((WM / TM) * (WN / TN) == 32,
                "a warp tile must hold exactly 32 thread tiles: (WM/TM) * (WN/TN) == 32");
  static_assert(TM % 4 == 0 && TN % 4 == 0,
                "TM and TN must be multiples of 4 (fragments are read as float4)");
  static_assert(TM * TN <= 128, "thread tile TM*TN > 128 accumulators would spill registers");
  static_assert(BK % 8 == 0, "BK must be a multiple of 8 (loads move 32-byte k segments)");
  static_assert(BM % 16 == 0 && BN % 16 == 0,
                "BM and BN must be multiples of 16 (conflict-free transposed shared stores)");
  static_assert(kThreads <= 1024, "at most 1024 threads per CTA");
  static_assert(kThreads * kRegBudget <= 65536,
                "too many threads for the register budget (TM*TN > 64 needs kThreads <= 256, "
                "else kThreads <= 512)");
  static_assert(BN % kThreads == 0 || kThreads % BN == 0,
                "tile_column_stats needs BN % kThreads == 0 or kThreads % BN == 0");
  // tile_column_stats adds a static __shared__ float[kThreads]; 232448 B is sm_90's per-block
  // limit (sm_80: 166912 B, reported at run time by cudaFuncSetAttribute).
  static_assert(kSmemBytes + kThreads * 4 <= 232448, "shared memory per CTA exceeds 227 KB");

  template <bool kVec>
  using LoaderA = simt_detail::TileLoader<BM, BK, kThreads, kVec>;
  template <bool kVec>
  using LoaderB = simt_detail::TileLoader<BN, BK, kThreads, kVec>;

  static __device__ __forceinline__ void load_frag(float (&fa)[TM], float (&fb)[TN],
                                                   const float* As, const float* Bs, int k,
                                                   int a_off, int b_off) {
#pragma unroll
    for (int c = 0; c < TM / 4; ++c) {
      const float4 v = *reinterpret_cast<const float4*>(As + k * kLdA + a_off + c * 4 * kLanesM);
      fa[4 * c + 0] = v.x;
      fa[4 * c + 1] = v.y;
      fa[4 * c + 2] = v.z;
      fa[4 * c + 3] = v.w;
    }
#pragma unroll
    for (int c = 0; c < TN / 4; ++c) {
      const float4 v = *reinterpret_cast<const float4*>(Bs + k * kLdB + b_off + c * 4 * kLanesN);
      fb[4 * c + 0] = v.x;
      fb[4 * c + 1] = v.y;
      fb[4 * c + 2] = v.z;
      fb[4 * c + 3] = v.w;
    }
  }

  template <bool kVec, class EPI>
  static __device__ __forceinline__ void run(const float* __restrict__ x,
                                             const float* __restrict__ w, int M, int N, int K,
                                             const EpilogueParams& p) {
    extern __shared__ __align__(16) float simt_smem[];

    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    int tile_m, tile_n;
    raster_tile<GROUP_M>(tiles_m, tiles_n, tile_m, tile_n);
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int warp_m = warp % kWarpsM;
    const int warp_n = warp / kWarpsM;
    const int lane_m = lane / kLanesN;
    const int lane_n = lane % kLanesN;
    // Offsets of this thread's first fragment chunk within a shared k-row.
    const int a_off = warp_m * WM + lane_m * 4;
    const int b_off = warp_n * WN + lane_n * 4;

    LoaderA<kVec> load_a(x, M, K, m0, tid);
    LoaderB<kVec> load_b(w, N, K, n0, tid);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    }

    const int ktiles = (K + BK - 1) / BK;
    if (ktiles > 0) {
      // Fragments are double-buffered too: the shared loads for k+1 are issued before the
      // FFMAs of k, which hides their latency within the warp.
      float fa[2][TM];
      float fb[2][TN];
      float* cur = simt_smem;
      float* nxt = simt_smem + kStageFloats;

      load_a.load();
      load_b.load();
      load_a.store(cur);
      load_b.store(cur + BK * kLdA);
      __syncthreads();
      load_frag(fa[0], fb[0], cur, cur + BK * kLdA, 0, a_off, b_off);

#pragma unroll 1
      for (int kt = 0; kt < ktiles; ++kt) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
          if (k == BK - 1) {
            // nxt was last read before the previous iteration's barrier, so it is free; the
            // barrier then publishes it and retires every read of cur. After the last tile this
            // stores zeros nobody reads.
            load_a.store(nxt);
            load_b.store(nxt + BK * kLdA);
            __syncthreads();
            float* t = cur;
            cur = nxt;
            nxt = t;
          }
          // At k == BK-1 this fetches k = 0 of the next tile (on the last tile: a harmless
          // read of shared memory that is never used).
          load_frag(fa[(k + 1) % 2], fb[(k + 1) % 2], cur, cur + BK * kLdA, (k + 1) % BK,
                    a_off, b_off);
          if (k == 0) {
            // Unconditional on purpose: past the last tile the K bound predicates every load
            // off, whereas a branch here let the compiler merge it with the stores' and sink
            // the loads right next to them, exposing the whole global latency. (ptxas still
            // places them a few k-steps later than written, ~250 instructions ahead of the
            // stores; with 8-16 resident warps per SM that covers an L2 hit.)
            load_a.load();
            load_b.load();
          }
#pragma unroll
          for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
              acc[i][j] = fmaf(fa[k % 2][i], fb[k % 2][j], acc[i][j]);
            }
          }
        }
      }
    }

    // The epilogue tile aliases the mainloop stages.
    __syncthreads();
    float* tile = simt_smem;
#pragma unroll
    for (int c = 0; c < TM / 4; ++c) {
#pragma unroll
      for (int ii = 0; ii < 4; ++ii) {
        const int r = a_off + c * 4 * kLanesM + ii;
#pragma unroll
        for (int d = 0; d < TN / 4; ++d) {
          const int col = b_off + d * 4 * kLanesN;
          *reinterpret_cast<float4*>(tile + r * kLdTile + col) =
              make_float4(acc[4 * c + ii][4 * d + 0], acc[4 * c + ii][4 * d + 1],
                          acc[4 * c + ii][4 * d + 2], acc[4 * c + ii][4 * d + 3]);
        }
      }
    }
    __syncthreads();
    tile_epilogue<BM, BN, kThreads, EPI>(tile, kLdTile, m0, n0, M, N, p);
  }

  template <bool kVec, class EPI>
  static cudaError_t launch_variant(const float* x, const float* w, int M, int N, int K,
                                    const EpilogueParams& p, int grid, cudaStream_t stream) {
    auto kernel = simt_gemm_kernel<SimtGemm, kVec, EPI>;
    if (kSmemBytes > 48 * 1024) {
      // Set on every launch rather than cached: the attribute is per device, and the call is
      // cheap next to a GEMM.
      const cudaError_t err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
      if (err != cudaSuccess) return err;
    }
    kernel<<<grid, kThreads, kSmemBytes, stream>>>(x, w, M, N, K, p);
    return cudaGetLastError();
  }

  template <class EPI>
  static cudaError_t launch(const float* x, const float* w, int M, int N, int K,
                            const EpilogueParams& p, cudaStream_t stream) {
    unsigned tiles = 0;
    cudaError_t status;
    if (!tile_grid<BM, BN>(M, N, K, tiles, status)) return status;
    // float4 loads need every row start 16-byte aligned: K % 4 == 0 on aligned bases.
    const bool vec = K % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
                     (reinterpret_cast<uintptr_t>(w) & 15) == 0;
    const int grid = static_cast<int>(tiles);
    return vec ? launch_variant<true, EPI>(x, w, M, N, K, p, grid, stream)
               : launch_variant<false, EPI>(x, w, M, N, K, p, grid, stream);
  }
};

}  // namespace kgen
