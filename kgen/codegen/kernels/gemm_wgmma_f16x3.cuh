// kgen Hopper GEMM, fp32-exact from three fp16 products (sm_90a only): z = x * w^T with x [M][K]
// and w [N][K] fp32 row-major, as accurate as the tf32x3 GEMM (gemm_wgmma_ws.cuh) at about half
// its tensor and shared-memory work.
//
// Why: the tf32x3 mainloop is bound by shared memory's bandwidth (docs/perf.md, session 10), and
// TF32 runs at half fp16's tensor rate. fp16 has TF32's 11 significant bits, so hi + lo in fp16
// carry the 22 bits that tf32x3's hi + lo do; what fp16 lacks is range (5 exponent bits). So a
// pass over each operand (f16x3_split_kernel) scales every row by a power of two, 2^shift, that
// puts its largest finite magnitude in [2^14, 2^15), and writes hi = fp16(v 2^shift) and
// lo = fp16(v 2^shift - hi) (the subtraction is exact in fp32). A row's elements then keep full
// precision down to 2^-29 of its largest, and fp16's subnormals resolve lo to 2^-24, far below the
// 2^-7 (of 2^15) that the largest element's own lo leaves: the split's error is the largest
// elements', as in tf32x3. The GEMM runs z' = lo_x hi_w + hi_x lo_w + hi_x hi_w on the tensor
// cores (fp32 accumulation), in partial sums of FLUSH k-tiles added into fp32 accumulators as
// tf32x3's are, and z = z' 2^-(shift_x[m] + shift_w[n]) (exact: a power of two) before the
// epilogue. An infinite element keeps lo = 0 (hi is the infinity); a NaN goes through hi.
//
// Pipeline: WgmmaWsHalfGemm's (gemm_wgmma_half.cuh, concatenated before this file): one producer
// thread issues four TMA loads per k-tile (hi and lo of x's BM rows and of w's BN rows, 64 k
// each), the consumer warpgroups read all four from shared memory by descriptor, twelve k16
// wgmmas per k-tile in one group. Workspace (entry.cuh's split_floats): the splits of x and w
// (an fp16 pair per element: one float's bytes) and the row shifts, recomputed on every call.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace kgen {

namespace f16x3_detail {

constexpr int kSplitThreads = 256;
// A row of up to kHeldQuads * 4 * kSplitThreads elements (8192: KernelBench's widest fp16x3 rows)
// is read once, into registers; a longer one twice (its largest magnitude, then its split): the
// second read of 2 * 4 bytes a element came partly from DRAM again (Nsight Compute: 743 MB moved
// for 604 MB of rows at 1024 x 8192 -> 8192, 259 us).
constexpr int kHeldQuads = 8;

// Rows [0, rows_a) of a, then [0, rows_b) of b (one block per row): each row's shift, then its
// hi and lo halves. K % 4 == 0 and 16-byte aligned rows (the GEMM's launch contract).
__global__ void __launch_bounds__(kSplitThreads)
    f16x3_split_kernel(const float* __restrict__ a, int rows_a, const float* __restrict__ b, int K,
                       __half* __restrict__ hi_a, __half* __restrict__ lo_a, int* __restrict__ shift_a,
                       __half* __restrict__ hi_b, __half* __restrict__ lo_b, int* __restrict__ shift_b) {
  const bool in_a = static_cast<int>(blockIdx.x) < rows_a;
  const long long row = in_a ? blockIdx.x : blockIdx.x - rows_a;
  const float4* src = reinterpret_cast<const float4*>((in_a ? a : b) + row * K);
  const int quads = K / 4;
  const bool held_row = quads <= kHeldQuads * kSplitThreads;
  float amax = 0.f;
  // (fmaxf drops a NaN, and an infinity does not count: the largest finite magnitude.)
  auto take = [&amax](const float4& v) {
    amax = fmaxf(amax, isinf(v.x) ? 0.f : fabsf(v.x));
    amax = fmaxf(amax, isinf(v.y) ? 0.f : fabsf(v.y));
    amax = fmaxf(amax, isinf(v.z) ? 0.f : fabsf(v.z));
    amax = fmaxf(amax, isinf(v.w) ? 0.f : fabsf(v.w));
  };
  float4 held[kHeldQuads];
  if (held_row) {
#pragma unroll
    for (int r = 0; r < kHeldQuads; ++r) {
      const int i = threadIdx.x + r * kSplitThreads;
      held[r] = i < quads ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
      take(held[r]);
    }
  } else {
    for (int i = threadIdx.x; i < quads; i += kSplitThreads) take(src[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  __shared__ float warp_max[kSplitThreads / 32];
  __shared__ int row_shift;
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = 0.f;
#pragma unroll
    for (int w = 0; w < kSplitThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    // 2^(14 - floor(log2 m)): m 2^shift in [2^14, 2^15); a row of zeros keeps its scale. At most
    // 126 (a row below 2^-112, fp32's smallest numbers, lands lower), so that the GEMM's way
    // back, 2^-(shift_x + shift_w), is two normal powers of two (scale_back).
    row_shift = m > 0.f ? min(14 - ilogbf(m), 126) : 0;
    (in_a ? shift_a : shift_b)[row] = row_shift;
  }
  __syncthreads();
  const int shift = row_shift;
  uint2* hi = reinterpret_cast<uint2*>((in_a ? hi_a : hi_b) + row * K);
  uint2* lo = reinterpret_cast<uint2*>((in_a ? lo_a : lo_b) + row * K);
  // An infinity: hi the largest finite fp16 of its sign and lo the infinity, so that every
  // product with a nonzero element of the other operand is infinite (its hi or its lo is
  // nonzero) and one with a zero is NaN, as in fp32 (tf32x3's clamp, mma_detail.cuh).
  auto split = [shift](float v, __half& h, __half& l) {
    const float s = ldexpf(v, shift);
    if (isinf(s)) {
      h = __float2half_rn(copysignf(65504.f, s));
      l = __float2half_rn(s);
    } else {
      h = __float2half_rn(s);
      l = __float2half_rn(s - __half2float(h));
    }
  };
  auto store = [&](int i, const float4& v) {
    __half h[4], l[4];
    split(v.x, h[0], l[0]);
    split(v.y, h[1], l[1]);
    split(v.z, h[2], l[2]);
    split(v.w, h[3], l[3]);
    hi[i] = *reinterpret_cast<const uint2*>(h);
    lo[i] = *reinterpret_cast<const uint2*>(l);
  };
  if (held_row) {
#pragma unroll
    for (int r = 0; r < kHeldQuads; ++r) {
      const int i = threadIdx.x + r * kSplitThreads;
      if (i < quads) store(i, held[r]);
    }
  } else {
    for (int i = threadIdx.x; i < quads; i += kSplitThreads) store(i, src[i]);
  }
}

// v 2^-(sx + sw), exact where the result is a normal number: two multiplications by normal
// powers of two (each shift is in [-113, 126]), half the exponent each, so that the product in
// between lies between v and the result (ldexpf's general path cost the epilogue registers).
__device__ __forceinline__ float scale_back(float v, int sx, int sw) {
  const int e = -(sx + sw);
  const int e1 = e >> 1;
  const int e2 = e - e1;
  return v * __int_as_float((e1 + 127) << 23) * __int_as_float((e2 + 127) << 23);
}

template <class Gemm, class EPI>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    wgmma_f16x3_kernel(const __grid_constant__ CUtensorMap map_xh, const __grid_constant__ CUtensorMap map_xl,
                       const __grid_constant__ CUtensorMap map_wh, const __grid_constant__ CUtensorMap map_wl,
                       const int* __restrict__ shift_x, const int* __restrict__ shift_w, int M, int N, int K,
                       EpilogueParams p) {
  Gemm::template run<EPI>(&map_xh, &map_xl, &map_wh, &map_wl, shift_x, shift_w, M, N, K, p);
}

}  // namespace f16x3_detail

template <int BM, int BN, int STAGES, int FLUSH, int GROUP_M>
struct WgmmaWsF16x3Gemm {
  static constexpr int kTileM = BM;
  static constexpr int BK = 64;  // 128 bytes of fp16 k per row: one swizzled row
  static constexpr int kConsumers = BM / 64;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kKSteps = BK / 16;
  static constexpr int kAccRegs = BN / 2;
  static constexpr int kABytes = BM * BK * 2;
  static constexpr int kBBytes = BN * BK * 2;
  // hi and lo of A, then hi and lo of B.
  static constexpr int kStageBytes = 2 * (kABytes + kBBytes);
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  static constexpr int kEpiBytes = WsEpilogue<BM, BN>::kTileBytes;
  static constexpr int kBufferBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;
  static constexpr int kBarrierBytes = 2 * STAGES * 8;
  static constexpr int kSmemBytes = kBufferBytes + kBarrierBytes + 1024;

  static_assert(BM == 64 || BM == 128, "BM must be 64 or 128 (one or two consumer warpgroups)");
  static_assert(BN == 64 || BN == 128, "BN must be 64 or 128 (the partial sums double the accumulators)");
  static_assert(STAGES >= 2, "STAGES must be >= 2");
  static_assert(FLUSH >= 1, "FLUSH (k-tiles per partial sum) must be >= 1");
  static_assert(GROUP_M >= 1, "GROUP_M must be >= 1");
  static_assert(WsEpilogue<BM, BN>::kStatsBytes <= kBufferBytes,
                "column_stats' scratch must fit in the pipeline buffers");
  static_assert(kSmemBytes + kThreads * 4 <= 227 * 1024,
                "shared memory over the 227 KB per-CTA limit of sm_90");

  // The workspace, in floats: x's and w's halves (two per element), then their row shifts,
  // each part rounded up to 64 floats (TMA reads 16-byte aligned rows).
  static long long round64(long long f) { return (f + 63) / 64 * 64; }
  static long long x_halves_offset() { return 0; }
  static long long w_halves_offset(int M, int K) { return round64(static_cast<long long>(M) * K); }
  static long long shifts_offset(int M, int N, int K) {
    return w_halves_offset(M, K) + round64(static_cast<long long>(N) * K);
  }
  static long long split_floats(int M, int N, int K) {
    return M <= SkinnyGemm<float>::kMaxRows ? 0 : shifts_offset(M, N, K) + round64(M) + round64(N);
  }

  template <class EPI>
  static cudaError_t launch(const float* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                            cudaStream_t stream) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<BM, BN>(M, N, K, tiles, e)) return e;
    if (SkinnyGemm<float>::applies(x, w, M, N, K)) return SkinnyGemm<float>::template launch<EPI>(x, w, M, N, K, p, stream);
    // fp16 rows need a 16-byte pitch for TMA; the workspace holds the splits.
    if (K % 8 != 0 || K == 0 || p.split_partials == nullptr) return cudaErrorInvalidValue;
    float* const ws = p.split_partials;
    __half* const xh = reinterpret_cast<__half*>(ws + x_halves_offset());
    __half* const xl = xh + static_cast<long long>(M) * K;
    __half* const wh = reinterpret_cast<__half*>(ws + w_halves_offset(M, K));
    __half* const wl = wh + static_cast<long long>(N) * K;
    int* const shift_x = reinterpret_cast<int*>(ws + shifts_offset(M, N, K));
    int* const shift_w = shift_x + round64(M);
    f16x3_detail::f16x3_split_kernel<<<M + N, f16x3_detail::kSplitThreads, 0, stream>>>(
        x, M, w, K, xh, xl, shift_x, wh, wl, shift_w);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    CUtensorMap map_xh, map_xl, map_wh, map_wl;
    constexpr CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    e = ws_detail::make_kmajor_map(&map_xh, xh, type, 2, M, K, BM);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_xl, xl, type, 2, M, K, BM);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wh, wh, type, 2, N, K, BN);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wl, wl, type, 2, N, K, BN);
    if (e != cudaSuccess) return e;
    const auto kernel = f16x3_detail::wgmma_f16x3_kernel<WgmmaWsF16x3Gemm, EPI>;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (e != cudaSuccess) return e;
    kernel<<<tiles, kThreads, kSmemBytes, stream>>>(map_xh, map_xl, map_wh, map_wl, shift_x, shift_w, M, N, K, p);
    return cudaGetLastError();
  }

  template <class EPI>
  __device__ static __forceinline__ void run(const CUtensorMap* map_xh, const CUtensorMap* map_xl,
                                             const CUtensorMap* map_wh, const CUtensorMap* map_wl,
                                             const int* shift_x, const int* shift_w, int M, int N, int K,
                                             const EpilogueParams& p) {
    using Mma = half_detail::Wgmma16<__half, BN>;
    extern __shared__ __align__(1024) unsigned char kgen_wgmma_f16x3_smem[];
    const uint32_t smem_raw = mma_detail::smem_addr(kgen_wgmma_f16x3_smem);
    const uint32_t smem = (smem_raw + 1023u) & ~1023u;
    unsigned char* const smem_ptr = kgen_wgmma_f16x3_smem + (smem - smem_raw);
    const uint32_t bars = smem + kBufferBytes;
    auto full = [&](int s) { return bars + 8 * s; };              // TMA bytes landed
    auto empty = [&](int s) { return bars + 8 * (STAGES + s); };  // consumers done
    auto a_hi = [&](int s) { return smem + s * kStageBytes; };
    auto a_lo = [&](int s) { return smem + s * kStageBytes + kABytes; };
    auto b_hi = [&](int s) { return smem + s * kStageBytes + 2 * kABytes; };
    auto b_lo = [&](int s) { return smem + s * kStageBytes + 2 * kABytes + kBBytes; };

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
    const int wg = warp >> 2;

    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        ws_detail::mbar_init(full(s), 1);
        ws_detail::mbar_init(empty(s), 4 * kConsumers);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;

    if (wg == 0) {
      if (tid == 0) {
        for (int kt = 0; kt < k_tiles; ++kt) {
          const int s = kt % STAGES;
          if (kt >= STAGES) ws_detail::mbar_wait(empty(s), ((kt / STAGES) - 1) & 1);
          ws_detail::mbar_arrive_expect_tx(full(s), 2 * (kABytes + kBBytes));
          ws_detail::tma_load(a_hi(s), map_xh, full(s), kt * BK, m0);
          ws_detail::tma_load(a_lo(s), map_xl, full(s), kt * BK, m0);
          ws_detail::tma_load(b_hi(s), map_wh, full(s), kt * BK, n0);
          ws_detail::tma_load(b_lo(s), map_wl, full(s), kt * BK, n0);
        }
      }
    } else {
      const int cwg = wg - 1;
      const uint32_t a_rows = cwg * 64 * 128;  // this warpgroup's 64 swizzled rows of 128 bytes
      float part[kAccRegs];
      // The two warpgroups add their partial sums in different k-tiles (FLUSH >= 2), so that one
      // keeps the tensor cores busy while the other waits for its products.
      const int flush_offset = cwg * (FLUSH / 2);
      bool fresh = true;  // the next k-tile starts a new partial sum
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        ws_detail::mbar_wait(full(s), (kt / STAGES) & 1);
        const uint64_t ah = wgmma_detail::sw128_desc(a_hi(s) + a_rows);
        const uint64_t al = wgmma_detail::sw128_desc(a_lo(s) + a_rows);
        const uint64_t bh = wgmma_detail::sw128_desc(b_hi(s));
        const uint64_t bl = wgmma_detail::sw128_desc(b_lo(s));
        wgmma_detail::fence();
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          const uint64_t k_off = static_cast<uint64_t>(ks * 2);  // 32 bytes in 16-byte units
          // Small products first, while the partial sum is smaller.
          Mma::mma(part, al + k_off, bh + k_off, ks == 0 && fresh ? 0 : 1);
          Mma::mma(part, ah + k_off, bl + k_off, 1);
          Mma::mma(part, ah + k_off, bh + k_off, 1);
        }
        wgmma_detail::commit();
        // Only this k-tile's group may still run: k-tile kt - 1 is done with its stage.
        wgmma_detail::wait<1>();
        if (kt > 0) {
          __syncwarp();
          if (lane == 0) ws_detail::mbar_arrive(empty((kt - 1) % STAGES));
        }
        fresh = kt + 1 == k_tiles || (kt + flush_offset) % FLUSH == FLUSH - 1;
        if (fresh) {
          wgmma_detail::wait<0>();
          wgmma_detail::fence_regs(part);
#pragma unroll
          for (int i = 0; i < kAccRegs; ++i) acc[i] += part[i];
        }
      }
      wgmma_detail::wait<0>();
      // Back to the operands' scale: 2^-(shift_x[row] + shift_w[col]), exact. (Layout: the
      // wgmma accumulator's, as WsEpilogue reads it.)
      const int r = m0 + cwg * 64 + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r + 8 * h;
        const int sx = row < M ? shift_x[row] : 0;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = n0 + 8 * j + 2 * (lane & 3) + e;
            const int sw = col < N ? shift_w[col] : 0;
            float& v = acc[4 * j + 2 * h + e];
            v = f16x3_detail::scale_back(v, sx, sw);
          }
        }
      }
    }
    // Every stage the producer filled has been consumed: the pipeline buffers are free for the
    // epilogue's scratch and tile.
    WsEpilogue<BM, BN>::template run<EPI>(acc, reinterpret_cast<float*>(smem_ptr), m0, n0, M, N, p);
  }
};

}  // namespace kgen
