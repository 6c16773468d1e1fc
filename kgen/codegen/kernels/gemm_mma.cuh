// kgen tensor-core GEMM on mma.sync: z = x * w^T, x [M][K] and w [N][K] fp32 row-major.
//
// Follows common.cuh and mma_detail.cuh (concatenated before this file; not included here):
// the math modes, loader, swizzle, ldmatrix and MMA wrappers are mma_detail.cuh's.
//
// Mainloop (sm_80 style, runs on sm_80 and sm_90a):
//   * cp.async multi-stage pipeline; operands stay fp32 in global and shared memory, so weights
//     that change between calls need no conversion pass.
//   * Shared tiles are [rows][BK] fp32 with the 16-byte chunks of each row XOR-swizzled, so the
//     cp.async stores and the ldmatrix reads are both free of bank conflicts.
//   * ldmatrix.b16 moves fp32 as pairs of b16: an "8x8 b16" matrix is 8 rows x 4 fp32, and the
//     x4 form lands exactly in the m16n8k8 tf32 A/B fragment layouts.
//   * Each k-step converts its raw fragments into MMA operands first, then prefetches the next
//     k-step's fragments into the freed registers, so the ldmatrix latency hides behind a
//     k-step of MMAs without a second raw buffer.
// Math modes:
//   kTF32x3    x ~= xb + xs, w ~= wb + ws (xb, wb tf32): part += xs*wb + xb*ws + xb*wb (xs*ws
//              dropped) over the BK/8 k-steps of one k-tile in a fresh partial accumulator,
//              then acc += part with ordinary fp32 adds once per k-tile.
//   kTF32      acc += tf32(x) * tf32(w)
//   kBF16      acc += bf16(x) * bf16(w), m16n8k16
//   kTF32x3Rn  kTF32x3 flushed after every k-step instead of every k-tile.
// Why the partial accumulators: tensor cores truncate when they accumulate (Fasi et al. 2021;
// measured on an H100, 2026-11-21: the three MMAs straight into acc gave 16x the error of a
// plain fp32 GEMM at K = 8192 and 8x at K = 4096, a bias that grows ~linearly with the number of
// accumulations). A fresh accumulator only truncates relative to one k-tile's partial sum, and
// the fp32 adds round to nearest; kTF32x3Rn measured 0.27-0.43x the fp32 error at 1.4x the time.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

namespace kgen {

namespace mma_detail {

template <class Gemm, bool kVec16, class EPI>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    mma_gemm_kernel(const float* __restrict__ x, const float* __restrict__ w, int M, int N, int K,
                    EpilogueParams p) {
  Gemm::template run<kVec16, EPI>(x, w, M, N, K, p);
}

}  // namespace mma_detail

template <MathMode MATH, int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP_M>
struct MmaGemm {
  static constexpr MathMode kMath = MATH;
  static constexpr int kTileM = BM;
  static constexpr int kWarpsM = BM / WM;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = (BM / WM) * (BN / WN) * 32;
  // One MMA consumes k = 8 (tf32) or 16 (bf16): one or two 8-deep ldmatrix slabs.
  static constexpr int kMmaK = MATH == MathMode::kBF16 ? 16 : 8;
  static constexpr int kSlabs = kMmaK / 8;
  static constexpr bool kRn = MATH == MathMode::kTF32x3Rn;
  static constexpr bool kTileFlush = MATH == MathMode::kTF32x3;  // partial sums per k-tile
  static constexpr bool kSplit = MATH == MathMode::kTF32x3 || kRn;
  static constexpr int kKSteps = BK / kMmaK;
  static constexpr int kMT = WM / 16;  // MMA tiles per warp along m
  static constexpr int kNT = WN / 8;   // MMA tiles per warp along n
  // B fragment registers per k-step: one per (n-tile, slab, k-half) 8x4 fp32 matrix.
  static constexpr int kBRegs = kNT * kSlabs * 2;
  // One ldmatrix.x4 of B covers 2 n-tiles of one slab (tf32) or 1 n-tile of both slabs (bf16).
  static constexpr int kBRowsPerLdsm = 16 / kSlabs;

  // Shared layout: per stage [BM][BK] of x then [BN][BK] of w, 16-byte chunks swizzled.
  static constexpr int kStageBytes = (BM + BN) * BK * 4;
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  static constexpr int kLdt = BN + 4;
  static constexpr int kEpiBytes = BM * kLdt * 4;
  static constexpr int kSmemBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;

  static_assert(WM > 0 && WN > 0 && BM % WM == 0 && BN % WN == 0,
                "BM and BN must be positive multiples of the warp tile WM and WN");
  static_assert(WM % 16 == 0, "WM must be a multiple of 16 (the MMA tile is 16 x 8)");
  static_assert(WN % 8 == 0, "WN must be a multiple of 8 (the MMA tile is 16 x 8)");
  static_assert(kThreads <= 1024, "at most 32 warps per CTA: (BM/WM)*(BN/WN) <= 32");
  static_assert(BK == 16 || BK == 32 || BK == 64,
                "BK must be 16, 32 or 64 (a power-of-two count of 16-byte chunks per smem row, "
                "for the XOR swizzle)");
  static_assert(kThreads % BK == 0,
                "kThreads must be a multiple of BK (the 4-byte copy path moves whole rows)");
  static_assert(!(kRn || kTileFlush) || WM * WN <= 64 * 32,
                "tf32x3: warp tile at most 2048 elements (e.g. 64x32); next to a 64x64 "
                "tile's accumulators its partial accumulators spill");
  static_assert(STAGES >= 2, "STAGES must be >= 2");
  static_assert(GROUP_M >= 1, "GROUP_M must be >= 1");
  // tile_epilogue instantiates tile_column_stats for every epilogue; it splits BN columns over
  // kThreads threads evenly.
  static_assert(BN < kThreads ? kThreads % BN == 0 : BN % kThreads == 0,
                "the epilogue needs kThreads % BN == 0 (BN < kThreads) or BN % kThreads == 0");
  // The kColStats epilogue adds a static __shared__ float[kThreads] (tile_column_stats' red).
  static_assert(kSmemBytes + kThreads * 4 <= 227 * 1024,
                "shared memory over the 227 KB per-CTA limit of sm_90: "
                "max(STAGES*(BM+BN)*BK*4, BM*(BN+4)*4) + 4*kThreads must be <= 232448");

  template <class EPI>
  static cudaError_t launch(const float* x, const float* w, int M, int N, int K,
                            const EpilogueParams& p, cudaStream_t stream) {
    return mma_detail::launch_tiles<BM, BN>(mma_detail::mma_gemm_kernel<MmaGemm, true, EPI>,
                                            mma_detail::mma_gemm_kernel<MmaGemm, false, EPI>,
                                            kThreads, kSmemBytes, x, w, M, N, K, p, stream);
  }

  // ---- device side (public only so the __global__ wrapper can call it) ----

  __device__ static __forceinline__ int swz(int row) { return mma_detail::swizzle_key<BK>(row); }

  template <int ROWS, bool kVec16>
  __device__ static __forceinline__ void load_rows(uint32_t s, const float* g, int row0,
                                                   int rows_total, int K, int k0, int tid) {
    mma_detail::load_swizzled_rows<ROWS, BK, kThreads, kVec16>(s, g, row0, rows_total, K, k0, tid);
  }

  // Per-lane ldmatrix addressing: row address in stage 0, and the swizzled 16-byte chunk of
  // k-step 0 as a byte offset. The chunk of k-step ks is ks * kMmaK / 4 higher; that offset has
  // no bits in common with the lane's chunk within the k-step, so the swizzle XOR applies to it
  // separately.
  struct LaneAddr {
    uint32_t a_row, a_col, b_row, b_col;
  };

  __device__ static __forceinline__ uint32_t ks_col(int ks) {
    return static_cast<uint32_t>(ks * (kMmaK / 4)) << 4;
  }

  // Raw A fragment of m-tile mt, k-step ks: fa[sl] = {A[g][t], A[g+8][t], A[g][t+4],
  // A[g+8][t+4]} of slab sl (g = lane / 4, t = lane % 4), fp32 bits.
  __device__ static __forceinline__ void load_a(uint32_t stage_off, int ks, int mt,
                                                const LaneAddr& la, uint32_t (&fa)[kSlabs][4]) {
#pragma unroll
    for (int sl = 0; sl < kSlabs; ++sl) {
      const uint32_t addr =
          stage_off + la.a_row + mt * 16 * BK * 4 + (la.a_col ^ (ks_col(ks) + (sl * 2 << 4)));
      mma_detail::ldsm_x4(addr, fa[sl][0], fa[sl][1], fa[sl][2], fa[sl][3]);
    }
  }

  // Raw B fragments of k-step ks: fb[(nt*kSlabs + sl)*2 + h] = B[k = t + 4h][n = g] of slab sl.
  __device__ static __forceinline__ void load_b(uint32_t stage_off, int ks, const LaneAddr& la,
                                                uint32_t (&fb)[kBRegs]) {
    const uint32_t base = stage_off + la.b_row + (la.b_col ^ ks_col(ks));
#pragma unroll
    for (int j = 0; j < kBRegs / 4; ++j) {
      mma_detail::ldsm_x4(base + j * kBRowsPerLdsm * BK * 4, fb[4 * j], fb[4 * j + 1],
                          fb[4 * j + 2], fb[4 * j + 3]);
    }
    if (kBRegs % 4 != 0) {  // odd n-tile count (tf32): the last n-tile alone
      constexpr int j = kBRegs / 4;
      mma_detail::ldsm_x2(base + j * kBRowsPerLdsm * BK * 4, fb[kBRegs - 2], fb[kBRegs - 1]);
    }
  }

  // Raw fragments (fp32 bits) to MMA operands; hi/lo are the tf32x3 big/small parts, the other
  // modes use hi only.
  // bf16: the raw fragments hold k = t and t+4 of each slab, m16n8k16 wants k = 2t, 2t+1 (+8)
  // per register. A dot product does not care about the order of k as long as A and B agree,
  // so (t, t+4) of slab s serve as MMA k (2t, 2t+1) + 8s in both operands.
  __device__ static __forceinline__ void convert_a(const uint32_t (&fa)[kSlabs][4],
                                                   uint32_t (&hi)[4], uint32_t (&lo)[4]) {
    if constexpr (kSplit) {
#pragma unroll
      for (int i = 0; i < 4; ++i) mma_detail::split_tf32(fa[0][i], hi[i], lo[i]);
    } else if constexpr (MATH == MathMode::kTF32) {
#pragma unroll
      for (int i = 0; i < 4; ++i) hi[i] = mma_detail::round_tf32(fa[0][i]);
    } else {
#pragma unroll
      for (int sl = 0; sl < 2; ++sl) {
        hi[2 * sl + 0] = mma_detail::pack_bf16(fa[sl][0], fa[sl][2]);  // row g
        hi[2 * sl + 1] = mma_detail::pack_bf16(fa[sl][1], fa[sl][3]);  // row g + 8
      }
    }
  }

  __device__ static __forceinline__ void convert_b(const uint32_t (&fb)[kBRegs],
                                                   uint32_t (&hi)[kNT][2], uint32_t (&lo)[kNT][2]) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if constexpr (kSplit) {
          mma_detail::split_tf32(fb[nt * 2 + i], hi[nt][i], lo[nt][i]);
        } else if constexpr (MATH == MathMode::kTF32) {
          hi[nt][i] = mma_detail::round_tf32(fb[nt * 2 + i]);
        } else {
          hi[nt][i] = mma_detail::pack_bf16(fb[(nt * 2 + i) * 2], fb[(nt * 2 + i) * 2 + 1]);
        }
      }
    }
  }

  // One k-step. The raw fragments in fa / fb are converted into operands, which frees them, and
  // the next k-step's (next_off, next_ks) are prefetched into them right away, B first, then A
  // one m-tile at a time between that m-tile's MMAs: the ldmatrix latency hides behind MMAs
  // without a second raw buffer, and only one m-tile of A operands is live at a time.
  // `fresh` (kTF32x3, first k-step of a k-tile): the first MMA overwrites the partial
  // accumulator instead of adding to it, so no separate zeroing pass is issued.
  __device__ static __forceinline__ void k_step(float (&acc)[kMT][kNT][4],
                                                uint32_t (&fa)[kMT][kSlabs][4],
                                                uint32_t (&fb)[kBRegs], uint32_t next_off,
                                                int next_ks, const LaneAddr& la,
                                                bool fresh = false) {
    // bf16 holds two k8 slabs of raw B, twice the registers; prefetching it only after the
    // MMAs keeps it out of the register peak (raw and converted B are never live together).
    constexpr bool kLateB = MATH == MathMode::kBF16;
    uint32_t b_hi[kNT][2], b_lo[kNT][2];
    convert_b(fb, b_hi, b_lo);
    if (!kLateB) load_b(next_off, next_ks, la, fb);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      uint32_t a_hi[4], a_lo[4];
      convert_a(fa[mt], a_hi, a_lo);
      load_a(next_off, next_ks, mt, la, fa[mt]);
      if constexpr (MATH == MathMode::kTF32x3) {
        // Small products first, while the accumulator holds the smaller partial sum.
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          if (fresh) {
            mma_detail::mma_tf32_zc(acc[mt][nt], a_lo, b_hi[nt]);
          } else {
            mma_detail::mma_tf32(acc[mt][nt], a_lo, b_hi[nt]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32(acc[mt][nt], a_hi, b_lo[nt]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32(acc[mt][nt], a_hi, b_hi[nt]);
      } else if constexpr (MATH == MathMode::kTF32x3Rn) {
        float part[kNT][4];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32_zc(part[nt], a_lo, b_hi[nt]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32(part[nt], a_hi, b_lo[nt]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32(part[nt], a_hi, b_hi[nt]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[mt][nt][i] += part[nt][i];
      } else if constexpr (MATH == MathMode::kTF32) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_tf32(acc[mt][nt], a_hi, b_hi[nt]);
      } else {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma_detail::mma_bf16(acc[mt][nt], a_hi, b_hi[nt]);
      }
    }
    if (kLateB) load_b(next_off, next_ks, la, fb);
  }

  template <bool kVec16, class EPI>
  __device__ static __forceinline__ void run(const float* __restrict__ x,
                                             const float* __restrict__ w, int M, int N, int K,
                                             const EpilogueParams& p) {
    extern __shared__ __align__(128) float kgen_mma_smem[];
    const int tiles_m = M / BM + (M % BM != 0);
    const int tiles_n = N / BN + (N % BN != 0);
    int tile_m, tile_n;
    raster_tile<GROUP_M>(tiles_m, tiles_n, tile_m, tile_n);
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;
    const int k_tiles = K / BK + (K % BK != 0);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm0 = (warp / kWarpsN) * WM;
    const int wn0 = (warp % kWarpsN) * WN;
    const uint32_t smem = mma_detail::smem_addr(kgen_mma_smem);

    // ldmatrix: lanes 8i..8i+7 address the rows of matrix i (destination register i).
    // A, per (m-tile, slab): matrices (rows 0-7, k 0-3), (rows 8-15, k 0-3), (0-7, k 4-7),
    // (8-15, k 4-7) = a0..a3. B, tf32: (n-tile 2j, k 0-3), (2j, k 4-7), (2j+1, k 0-3),
    // (2j+1, k 4-7); bf16: n-tile j, (slab 0, k 0-3), (0, k 4-7), (1, k 0-3), (1, k 4-7).
    // Every lane's row is 8*q + (lane & 7), and the swizzle key has period 8 rows, so one key
    // per lane serves all its rows.
    const int sw = swz(lane & 7);
    const int b_row = kSlabs == 1 ? ((lane >> 4) << 3) + (lane & 7) : (lane & 7);
    const int b_cl = kSlabs == 1 ? (lane >> 3) & 1 : lane >> 3;
    LaneAddr la;
    la.a_row = smem + (wm0 + (lane & 15)) * BK * 4;
    la.a_col = static_cast<uint32_t>((lane >> 4) ^ sw) << 4;
    la.b_row = smem + BM * BK * 4 + (wn0 + b_row) * BK * 4;
    la.b_col = static_cast<uint32_t>(b_cl ^ sw) << 4;

    auto load_stage = [&](int stage, int kt) {
      const uint32_t s = smem + stage * kStageBytes;
      load_rows<BM, kVec16>(s, x, m0, M, K, kt * BK, tid);
      load_rows<BN, kVec16>(s + BM * BK * 4, w, n0, N, K, kt * BK, tid);
    };

    auto zero = [](float (&a)[kMT][kNT][4]) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][nt][i] = 0.f;
    };
    float acc[kMT][kNT][4];
    float part[kMT][kNT][4];  // kTF32x3 only (written fresh each k-tile); otherwise eliminated
    zero(acc);

    // One commit group per k-tile, empty ones included, so that "k-tile kt has landed" is
    // always cp.async.wait_group(STAGES - 2) at the end of k-tile kt - 1.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) load_stage(s, s);
      mma_detail::cp_async_commit();
    }
    mma_detail::cp_async_wait<STAGES - 2>();
    __syncthreads();

    uint32_t fa[kMT][kSlabs][4];
    uint32_t fb[kBRegs];
    load_b(0, 0, la, fb);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) load_a(0, 0, mt, la, fa[mt]);

    int read_stage = 0;   // stage of k-tile kt
    int write_stage = STAGES - 1;  // stage of k-tile kt + STAGES - 1
    auto k_step_of_tile = [&](int kt, int ks) {
      if (ks == 0) {
        // Refills the stage that k-tile kt - 1 used, freed by the barrier of k-tile kt - 1.
        if (kt + STAGES - 1 < k_tiles) load_stage(write_stage, kt + STAGES - 1);
        mma_detail::cp_async_commit();
        write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
      }
      if (ks == kKSteps - 1) {
        // The last k-step prefetches k-step 0 of k-tile kt + 1: with kt + STAGES commit groups
        // issued, that is all but the newest STAGES - 2. All reads of k-tile kt's stage were
        // issued by now (this k-step's fragments are in registers), so past this barrier the
        // next k-tile's cp.async may refill it.
        mma_detail::cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      }
      if constexpr (kTileFlush) {
        k_step(part, fa, fb, read_stage * kStageBytes, (ks + 1) % kKSteps, la, ks == 0);
        if (ks == kKSteps - 1) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[mt][nt][i] += part[mt][nt][i];
        }
      } else {
        k_step(acc, fa, fb, read_stage * kStageBytes, (ks + 1) % kKSteps, la);
      }
    };
    for (int kt = 0; kt < k_tiles; ++kt) {
      if constexpr (kRn) {
        // Unrolled, ptxas overlaps the k-steps' serial MMA chains and runs out of registers;
        // no register array is indexed by ks, so the loop may stay rolled.
#pragma unroll 1
        for (int ks = 0; ks < kKSteps; ++ks) k_step_of_tile(kt, ks);
      } else {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) k_step_of_tile(kt, ks);
      }
    }

    // Epilogue: the accumulator tile goes through shared memory (reusing the pipeline buffers)
    // so that the stores to z are coalesced and column statistics see whole columns.
    mma_detail::cp_async_wait<0>();
    __syncthreads();
    float* tile = kgen_mma_smem;
    const int g = lane >> 2;
    const int t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int r = wm0 + mt * 16 + g;
        const int c = wn0 + nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(&tile[r * kLdt + c]) =
            make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(&tile[(r + 8) * kLdt + c]) =
            make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
    }
    __syncthreads();
    tile_epilogue<BM, BN, kThreads, EPI>(tile, kLdt, m0, n0, M, N, p);
  }
};

}  // namespace kgen
