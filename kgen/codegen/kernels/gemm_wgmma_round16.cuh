// kgen Hopper GEMM on 16-bit products of fp32 operands (sm_90a only): z = x * w^T with x [M][K] and
// w [N][K] fp32 row-major (x already of T inside torch.autocast: X below), each product T(x) T(w) (T = __nv_bfloat16 or __half, round to nearest),
// accumulated in fp32 by the tensor cores: the 1e-2 tier's GEMM for an fp32 module (math "bf16" or
// "fp16" on --backend wgmma). bf16 products are what eager's Linear computes inside
// torch.autocast(dtype=torch.bfloat16); fp16 products what it computes inside fp16 autocast, and
// they keep 11 significant bits as TF32 does (bf16 8): as accurate as TF32 products at bf16's rate,
// for operands within fp16's range (|v| <= 65504; larger ones become infinite, as in fp16 autocast;
// below 2^-14 they lose bits as subnormals). The search's probe rounds the module's operands to
// each math's type before it admits the math at a tolerance (search.probe_maths).
//
// Why not convert both operands in a pass and run the 16-bit GEMM: w, the operand streamed from
// memory (8192 x 8192 at KernelBench's shapes), would be read as fp32 and written as 16-bit before
// the GEMM reads it again: 0.08 ms of KernelBench 12's 0.35 under autocast (docs/perf.md,
// session 43). Why not convert in the TMA producer: the fp32 stage written by TMA, read by the
// converter and written back as 16-bit, then read by the tensor cores, is 320 KB of shared memory
// traffic per 128 x 256 x 64 k-tile, 2.5x the 16-bit tensor rate's budget and more than the tf32
// GEMM's. Here w is the A operand, which wgmma reads from registers: TMA loads w's fp32 tile, each
// consumer thread reads its A fragment's elements once and rounds them to T in registers, and
// the tensor cores read only x (the B operand: T, converted once per call by a pass over x,
// small where w is large) from shared memory. Per 128 (w) x 256 (x) x 64 k-tile: TMA writes 32 KB
// of w and 32 KB of x, the consumers read w's 32 KB, the wgmmas x's 32 KB twice (once per
// consumer warpgroup): 160 KB for 4.2 MFLOP, 1.25x the 16-bit rate's 128 KB where the tf32 GEMM
// needs 256 KB for the same work (docs/perf.md, session 44). x's pass also permutes k within
// groups of 32 so that the consumers' reads of w are free of bank conflicts (kPermuteK).
//
// Roles as in the fp16x3 GEMM's w-in-registers mainloop (gemm_wgmma_f16x3.cuh): w's 128 rows are
// wgmma's M (each consumer warpgroup 64), x's 256 rows its N, so each consumer holds z's tile
// transposed (64 x 256: 128 accumulators a thread). After the last k-tile the CTA runs the
// epilogue twice, once per 128 rows of x: the 64 accumulators of those rows go back to z's layout
// through shared memory (transpose_acc), then WsEpilogue<128, 128> as for a 128 x 128 tile at
// (m0 + 128 h, n0), so BatchNorm's partials come one per 128 rows (kTileM). A batch of at most 128
// rows runs CTAs of one tile instead (Narrow: x's 128 rows as wgmma's N, 4 stages in the same
// bytes), where a CTA of two would compute half its rows past the batch: KernelBench 55 (128 x
// 32768 -> 32768) 1.51 -> 1.13 ms, 68 (128 x 16384 -> 16384) 0.39 -> 0.28 (H200, docs/perf.md,
// session 45), past cuBLAS's BF16 files (1.20, 0.31).
//
// Pipeline: one producer thread issues three TMA loads per k-tile (w's two 32-float boxes, x's
// 64 k of T), STAGES stages. Each consumer converts and issues a k-tile in groups of
// KGEN_ROUND16_GROUP_STEPS k16 wgmmas, its A fragments in two register sets: while one group runs,
// the next group's fragments are converted into the other set. The producer warpgroup hands its
// registers to the consumers for the mainloop (setmaxnreg: 40 and 232 a thread, all at 168 again
// for the epilogue, in which every thread works): with two wgmmas a group (8 registers a set) the
// 168 registers a thread of 384 otherwise has made ptxas spill and serialize the wgmmas (C7512).
// Measured against one wgmma a group at 168 (H200, session 44): KernelBench 12 0.325 -> 0.289 ms,
// 39 1.599 -> 1.383.
//
// Not here: split-K (a few hundred rows of an output a few tiles wide leave SMs idle: the search's
// other candidates cover such shapes), K % 8 != 0 (spec.ROUND16_K_MULTIPLE: the generator gives such a GEMM the
// tf32 one, generator.gemm_type; x's 16-bit rows are padded to a multiple of 32, so K % 4, which w's
// fp32 rows need for TMA, would do, but that path has not run on a GPU), and at most SkinnyGemm's
// rows (its fp32 products).
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

// KGEN_ROUND16_SETMAXNREG, KGEN_ROUND16_GROUP_STEPS: the registers' hand-over and the k16 wgmmas a
// group (see the pipeline above); a file's source defining them first runs the other way (an A/B:
// docs/experiments/s44/bf16_variant_files.py).
#ifndef KGEN_ROUND16_SETMAXNREG
#define KGEN_ROUND16_SETMAXNREG 1
#endif
#ifndef KGEN_ROUND16_GROUP_STEPS
#define KGEN_ROUND16_GROUP_STEPS 2
#endif

namespace kgen {

namespace round16_detail {

// k within each group of 32 is permuted (kPermuteK): position p of x's 16-bit row holds x's k =
// perm(p), bits 2-4 of p rotated: (bit 3, bit 4, bit 2) of p are bits (2, 3, 4) of k. A dot
// product does not care about the order of k as long as both operands agree, and in this order
// the A fragment a thread needs for a k-step (its k pairs 2q and 2q + 8 of each k16, in wgmma's
// order) lies in w's swizzled box so that each of its four 8-byte reads of a row per box is free
// of bank conflicts: in each read, threads q = 0, 1 take two halves of a 16-byte chunk of the
// box's first four, q = 2, 3 of its last four, and the rows' swizzle (chunk ^ row % 8) spreads the
// half-warp's four rows over the other chunks of those fours. (Read in k's order, rows r and
// r ^ 1 hit the same banks: 9.1 M of the kernel's 36 M shared-memory wavefronts were conflicts,
// Nsight Compute, KernelBench 12, H200, session 44.)
constexpr int kPermuteK = 32;
__host__ __device__ constexpr int permuted_quad(int a) { return ((a >> 1) & 3) | ((a & 1) << 2); }

// Two fp32 elements as a T x2 pair (round to nearest, as torch's .to(dtype)), the lower k in the
// low half (the wgmma fragment's order).
template <class T>
__device__ __forceinline__ uint32_t pack(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// x's 16-bit copy, its k permuted per kPermuteK and its rows padded with zeros to k_pad (a
// multiple of kPermuteK): four elements a thread and step (K % 8 == 0 and 16-byte aligned rows:
// the GEMM's launch contract). x of fp32 (an fp32 module's) is rounded here; x already of T
// (inside torch.autocast, converted as autocast converts it) is only permuted.
template <class T, class X>
__global__ void to_16bit_kernel(const X* __restrict__ x, int K, int k_pad, uint2* __restrict__ out,
                                long long quads) {
  static_assert(std::is_same<X, float>::value || std::is_same<X, T>::value, "x is fp32 or of the products' type");
  const int row_quads = k_pad / 4;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < quads;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long row = i / row_quads;
    const int quad = static_cast<int>(i - row * row_quads);
    const int k = (quad / 8) * kPermuteK + 4 * permuted_quad(quad % 8);
    if constexpr (std::is_same<X, float>::value) {
      const float4 v = k < K ? *reinterpret_cast<const float4*>(x + row * K + k) : make_float4(0.f, 0.f, 0.f, 0.f);
      out[i] = make_uint2(pack<T>(v.x, v.y), pack<T>(v.z, v.w));
    } else {
      out[i] = k < K ? *reinterpret_cast<const uint2*>(x + row * K + k) : make_uint2(0u, 0u);
    }
  }
}

// Keeps a fragment set's registers live (and unchanged) up to this point, as fence_regs keeps
// the accumulators: a set goes to an asynchronous wgmma, and nothing may reuse its registers
// before the wait that says the wgmma has read them.
template <int N>
__device__ __forceinline__ void fence_fragments(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
  }
}

template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <class Gemm, class EPI>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    wgmma_round16_kernel(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                      int M, int N, int K, EpilogueParams p) {
  Gemm::template run<EPI>(&map_w, &map_x, M, N, K, p);
}

}  // namespace round16_detail

namespace round16_detail {

// The CTA: PASSES tiles of BM x BN stacked in rows (x's rows m0 .. m0 + PASSES BM - 1 by BN rows of
// w), its mainloop, and its epilogue run once per tile.
template <class T, int BM, int BN, int STAGES, int GROUP_M, int PASSES>
struct Cta {
  static constexpr int kTileM = BM;        // rows per epilogue pass (and per BatchNorm partial)
  static constexpr int kRows = PASSES * BM;  // x's rows per CTA: wgmma's N
  static constexpr int BK = 64;            // k per stage: 128 bytes of T, two 128-byte boxes of fp32
  static constexpr int kConsumers = BN / 64;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kKSteps = BK / 16;
  static constexpr int kGroupSteps = KGEN_ROUND16_GROUP_STEPS;    // k16 wgmmas per group
  static constexpr int kGroups = kKSteps / kGroupSteps;
  static constexpr int kAccRegs = kRows / 2;
  static constexpr int kWBytes = BN * BK * 4;
  static constexpr int kXBytes = kRows * BK * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  using Epilogue = WsEpilogue<BM, BN>;
  // The transposed tile (BN x (BN + 4) floats, transpose_acc) and the epilogue's tile: the same bytes.
  static constexpr int kEpiBytes = Epilogue::kTileBytes;
  static constexpr int kBufferBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;
  static constexpr int kBarrierBytes = ws_detail::TmaStages<STAGES>::kBarrierBytes;
  static constexpr int kSmemBytes = kBufferBytes + kBarrierBytes + 1024;

  static_assert(BM == 128 && BN == 128, "the round16 GEMM's tile is 128 x 128");
  static_assert(PASSES == 1 || PASSES == 2, "a CTA of one or two tiles");
  static_assert(round16_detail::kPermuteK == 32 && BK % round16_detail::kPermuteK == 0,
                "k is permuted within each of w's 32-float boxes");
  static_assert(STAGES >= 2, "STAGES must be >= 2");
  static_assert(GROUP_M >= 1, "GROUP_M must be >= 1");
  static_assert(kKSteps % kGroupSteps == 0 && kGroups % 2 == 0, "a k-tile is an even number of groups (the fragment sets' order)");
  static_assert(Epilogue::kStatsBytes <= kBufferBytes, "column_stats' scratch must fit in the pipeline buffers");
  static_assert(kSmemBytes + kThreads * 4 <= 227 * 1024, "shared memory over the 227 KB per-CTA limit of sm_90");

  template <class EPI>
  __device__ static __forceinline__ void run(const CUtensorMap* map_w, const CUtensorMap* map_x, int M, int N,
                                             int K, const EpilogueParams& p) {
    using Mma = half_detail::Wgmma16<T, kRows>;
    extern __shared__ __align__(1024) unsigned char kgen_wgmma_round16_smem[];
    const int tiles_m = M / kRows + (M % kRows != 0);
    const int tiles_n = N / BN + (N % BN != 0);
    int tile_m, tile_n;
    raster_tile<GROUP_M>(tiles_m, tiles_n, tile_m, tile_n);
    const int m0 = tile_m * kRows;
    const int n0 = tile_n * BN;
    const int k_tiles = K / BK + (K % BK != 0);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wg = warp >> 2;

    const auto pipe = ws_detail::TmaStages<STAGES>::init(kgen_wgmma_round16_smem, kBufferBytes, 4 * kConsumers);
    const uint32_t smem = pipe.smem;
    unsigned char* const smem_ptr = pipe.ptr;
    // A stage: w's two boxes of BN rows x 32 floats (128 swizzled bytes a row), k 0-31 then
    // 32-63, then x's kRows rows x 64 T.
    auto w_box = [&](int s, int box) { return smem + s * kStageBytes + box * BN * 128; };
    auto x_stage = [&](int s) { return smem + s * kStageBytes + kWBytes; };

    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;

    if (wg == 0) {
      if constexpr (KGEN_ROUND16_SETMAXNREG) round16_detail::setmaxnreg_dec<40>();
      if (tid == 0) {
        pipe.produce(k_tiles, kStageBytes, [&](int s, int kt) {
          const int k0 = kt * BK;
          ws_detail::tma_load(w_box(s, 0), map_w, pipe.full(s), k0, n0);
          ws_detail::tma_load(w_box(s, 1), map_w, pipe.full(s), k0 + 32, n0);
          ws_detail::tma_load(x_stage(s), map_x, pipe.full(s), k0, m0);
        });
      }
      if constexpr (KGEN_ROUND16_SETMAXNREG) round16_detail::setmaxnreg_inc<168>();
    } else {
      if constexpr (KGEN_ROUND16_SETMAXNREG) round16_detail::setmaxnreg_inc<232>();
      const int cwg = wg - 1;
      const int q = lane & 3;
      // The thread's two rows of w's tile (the A fragment's rows, and its accumulators').
      const int r0 = cwg * 64 + (warp & 3) * 16 + (lane >> 2);
      const int r1 = r0 + 8;
      // The A fragment's fp32 pair at (permuted) k 16 ks + 2q + 8 second of row r: x's k
      // permuted as to_16bit_kernel permutes it, so k 16 (ks % 2) + 8 second + 2q of w's box ks / 2,
      // i.e. its 16-byte chunk 4 (q / 2) + 2 (ks % 2) + second, half q % 2 (swizzled: chunk ^ r % 8).
      auto at = [&](int s, int ks, int r, int second) {
        const float* box = reinterpret_cast<const float*>(smem_ptr + (w_box(s, ks >> 1) - smem));
        const int chunk = 4 * (q >> 1) + 2 * (ks & 1) + second;
        return *reinterpret_cast<const float2*>(box + r * 32 + 4 * (chunk ^ (r & 7)) + 2 * (q & 1));
      };
      auto pack2 = [](float2 v) { return round16_detail::pack<T>(v.x, v.y); };
      // Group g of the mainloop: k-tile g / kGroups, its k-steps kGroupSteps (g % kGroups) on.
      auto convert = [&](uint32_t (&a)[kGroupSteps][4], int g) {
        const int kt = g / kGroups;
        const int s = kt % STAGES;
        if (g % kGroups == 0) ws_detail::mbar_wait(pipe.full(s), (kt / STAGES) & 1);
#pragma unroll
        for (int i = 0; i < kGroupSteps; ++i) {
          const int ks = kGroupSteps * (g % kGroups) + i;
          a[i][0] = pack2(at(s, ks, r0, 0));
          a[i][1] = pack2(at(s, ks, r1, 0));
          a[i][2] = pack2(at(s, ks, r0, 1));
          a[i][3] = pack2(at(s, ks, r1, 1));
        }
      };
      auto issue = [&](uint32_t (&a)[kGroupSteps][4], int g) {
        const int s = (g / kGroups) % STAGES;
        const uint64_t xd = wgmma_detail::sw128_desc(x_stage(s));
        wgmma_detail::fence();
#pragma unroll
        for (int i = 0; i < kGroupSteps; ++i) {
          const int ks = kGroupSteps * (g % kGroups) + i;
          Mma::mma(acc, a[i], xd + static_cast<uint64_t>(ks * 2), 1);  // 32 bytes a k-step, in 16-byte units
        }
        wgmma_detail::commit();
      };
      // kGroups groups a k-tile, two fragment sets: set 0 holds even groups, set 1 odd ones.
      // After each wait<1> only the newest group runs: the other set is free, and when the group
      // that finished was a k-tile's last, its stage is.
      uint32_t a0[kGroupSteps][4], a1[kGroupSteps][4] = {};
      const int groups = kGroups * k_tiles;
      convert(a0, 0);
      for (int g = 0; g < groups; g += 2) {
        issue(a0, g);
        wgmma_detail::wait<1>();
        round16_detail::fence_fragments(a1);
        if (g > 0 && g % kGroups == 0) {   // group g - 1, the last of k-tile g / kGroups - 1, is done
          __syncwarp();
          if (lane == 0) ws_detail::mbar_arrive(pipe.empty((g / kGroups - 1) % STAGES));
        }
        convert(a1, g + 1);
        issue(a1, g + 1);
        wgmma_detail::wait<1>();
        round16_detail::fence_fragments(a0);
        if (g + 2 < groups) convert(a0, g + 2);
      }
      wgmma_detail::wait<0>();
      wgmma_detail::fence_regs(acc);
      round16_detail::fence_fragments(a1);
      if constexpr (KGEN_ROUND16_SETMAXNREG) round16_detail::setmaxnreg_dec<168>();
    }
    // The epilogue per 128 rows of x (pass h: the accumulators of x's rows m0 + 128 h ..), each
    // as a 128 x 128 tile's. The whole CTA takes part (WsEpilogue), so the pass's bounds are the
    // CTA's: a second pass only where those rows exist.
    float* const t = reinterpret_cast<float*>(smem_ptr);
#pragma unroll
    for (int h = 0; h < PASSES; ++h) {
      const int mh = m0 + BM * h;
      if (mh >= M) break;
      if (h > 0) __syncthreads();   // pass 0's reads of the tile are done before it is overwritten
      float sub[kAccRegs / PASSES];
#pragma unroll
      for (int i = 0; i < kAccRegs / PASSES; ++i) sub[i] = acc[h * (kAccRegs / PASSES) + i];
      // (Every consumer's wgmmas have read their last stage: transpose_acc's first barrier.)
      if (wg > 0) transpose_acc<BN, BM>(sub, t);
      Epilogue::template run<EPI>(sub, t, mh, n0, M, N, p);
    }
  }
};

}  // namespace round16_detail

// T: the products' type (__nv_bfloat16 or __half). BM x BN: the epilogue's tile (128 x 128,
// spec.Tile's bm and bn). A CTA computes two of them, the rows m0 .. m0 + 255 of x by BN rows of
// w (Wide: wgmma's N 256, each k-tile of w's rounding shared by twice the rows), except where the
// whole batch fits one tile's rows: there half of a 256-row CTA would lie past the batch, and
// Narrow's CTAs of 128 rows (wgmma's N 128) do no work for nothing (KernelBench's files of 128
// rows, whose GEMM reads w at the memory's rate).
// X: x's type as the GEMM reads it: fp32 (an fp32 module, math bf16 / fp16), or T (an fp32 module
// inside torch.autocast: x converted as autocast converts it, w left fp32, so that no pass over w
// converts it on each call; the build for autocast with KGEN_FP32_WEIGHT, kernel.cu.j2). With x
// of T no few-row GEMM of fp32 products applies: a few rows run the CTAs of one tile (not run on
// a GPU: ModelNew converts the weight at batches of at most SKINNY_MAX_ROWS, where the half GEMM's
// few-row path runs; configs.AUTOCAST_FP32_WEIGHT_MIN_ROWS).
template <class T, int BM, int BN, int STAGES, int GROUP_M, class X = float>
struct WgmmaWsRound16Gemm {
  static constexpr bool kFewRowGemm = std::is_same<X, float>::value;  // (SkinnyGemm<float>'s rows)
  using Wide = round16_detail::Cta<T, BM, BN, STAGES, GROUP_M, 2>;
  // Narrow's stages (w's 128 rows and x's 128) in the bytes of Wide's (x's 256): 4 for 3, more of
  // w in flight where the GEMM waits on the memory (spec.wgmma_smem_bytes mirrors both).
  static constexpr int kNarrowStages = STAGES * Wide::kStageBytes / (BN * 64 * 4 + BM * 64 * 2);
  using Narrow = round16_detail::Cta<T, BM, BN, kNarrowStages, GROUP_M, 1>;
  static constexpr int kTileM = BM;        // rows per epilogue pass (and per BatchNorm partial)
  static constexpr int kRows = 2 * BM;     // x's rows per CTA (Wide's; Narrow's at batches up to BM)
  static constexpr int kThreads = Wide::kThreads;
  static constexpr int kSmemBytes = Wide::kSmemBytes > Narrow::kSmemBytes ? Wide::kSmemBytes : Narrow::kSmemBytes;
  static_assert(Wide::kRows == kRows && Narrow::kRows == BM, "the CTAs' rows");
  static_assert(Narrow::kStageBytes == BN * 64 * 4 + BM * 64 * 2, "kNarrowStages counts Narrow's stage");
  static_assert(Narrow::kThreads == kThreads, "one CTA size");

  // The GEMM's own workspace (entry.cuh places it last; p.split_partials): x's 16-bit copy.
  static int k_pad(int K) { return (K + round16_detail::kPermuteK - 1) / round16_detail::kPermuteK * round16_detail::kPermuteK; }
  static long long split_floats(int M, int N, int K) {
    if (kFewRowGemm && M <= SkinnyGemm<float>::kMaxRows) return 0;
    return (static_cast<long long>(M) * k_pad(K) / 2 + 63) / 64 * 64;
  }

  template <class EPI>
  static cudaError_t launch(const X* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                            cudaStream_t stream) {
    return M <= Narrow::kRows ? launch_as<Narrow, EPI>(x, w, M, N, K, p, stream)
                              : launch_as<Wide, EPI>(x, w, M, N, K, p, stream);
  }

  template <class C, class EPI>
  static cudaError_t launch_as(const X* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                               cudaStream_t stream) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<C::kRows, BN>(M, N, K, tiles, e)) return e;
    if constexpr (kFewRowGemm) {
      if (SkinnyGemm<float>::applies(x, w, M, N, K)) return SkinnyGemm<float>::template launch<EPI>(x, w, M, N, K, p, stream);
    }
    // (K % 8: the generator's contract, spec.ROUND16_K_MULTIPLE.) The workspace holds x's copy.
    if (K % 8 != 0 || K == 0 || p.split_partials == nullptr) return cudaErrorInvalidValue;
    uint2* const xb = reinterpret_cast<uint2*>(p.split_partials);
    const int kp = k_pad(K);
    const long long quads = static_cast<long long>(M) * kp / 4;
    const int blocks = static_cast<int>(std::min<long long>((quads + 255) / 256, 8LL * ws_detail::sm_count()));
    round16_detail::to_16bit_kernel<T, X><<<blocks, 256, 0, stream>>>(x, K, kp, xb, quads);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    CUtensorMap map_w, map_x;
    e = ws_detail::make_kmajor_map(&map_w, w, N, K, BN);   // fp32, 32 k a box
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_x, xb, half_detail::TmaType<T>::kValue, 2, M, kp, C::kRows);
    if (e != cudaSuccess) return e;
    const auto kernel = round16_detail::wgmma_round16_kernel<C, EPI>;
    e = allow_dynamic_smem<round16_detail::wgmma_round16_kernel<C, EPI>>(C::kSmemBytes);
    if (e != cudaSuccess) return e;
    kernel<<<tiles, C::kThreads, C::kSmemBytes, stream>>>(map_w, map_x, M, N, K, p);
    return cudaGetLastError();
  }

};

}  // namespace kgen
