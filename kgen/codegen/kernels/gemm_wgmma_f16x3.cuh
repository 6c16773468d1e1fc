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
// epilogue. An infinite element splits as hi = the largest finite fp16 of its sign and lo = the
// infinity; a NaN goes through hi.
//
// Square tiles at batches of at most W_IN_REGISTERS_MAX_ROWS (KGEN_F16X3_W_IN_REGISTERS) split w
// inside the GEMM instead, so that w, the operand streamed from memory, is read once as it is
// (its split in a pass of its own read 4 bytes and wrote 4 more per element before the GEMM read
// those: at 128 x 32768 -> 32768, 8 of its 12 GB; docs/perf.md, session 22). The roles are
// swapped as tf32x3's x_as_b swaps them (gemm_wgmma_ws.cuh): w is the A operand, TMA-loaded as
// fp32, x (split by the pass: M x K, small at such batches) the B operand in shared memory. Per
// k-tile of 64 k, each consumer thread reads its A fragment's fp32 elements once for its two
// rows' largest finite magnitudes (a quad of threads holds a row's 64), then again to scale them
// by the rows' shifts and split them into fp16 hi and lo in registers, and issues the three
// products with A from registers, the k-tile's twelve wgmmas in one group. A shift per row and
// k-tile means a partial sum per k-tile, added into the fp32 accumulators as
// acc += part 2^-shift_w (exact); after the last k-tile the accumulators (z's tile transposed) go
// back through shared memory to z's layout and are scaled by 2^-shift_x. That GEMM is slower than
// the other's at large batches (its consumers split and wait for every k-tile's products), so the
// pass stays where w's share of the traffic is small. A caller that hands the GEMM a kept split of w
// (p.w_split) at such a batch gets the other mainloop on it instead: the emitted file where its user
// trusts w's version counter (trusted_w_split_floats), so that an unchanged w is not read at all.
//
// Pipeline otherwise WgmmaWsHalfGemm's (gemm_wgmma_half.cuh, concatenated before this file): one
// producer thread issues four TMA loads per k-tile (hi and lo of x's BM rows and of w's BN rows,
// 64 k each; with w in registers, w's two 32-float boxes and x's hi and lo), the consumer
// warpgroups read them from shared memory by descriptor, twelve k16 wgmmas per k-tile in one
// group. Workspace (entry.cuh's split_floats): split-K's partials (SplitK, as in WgmmaWsGemm: at a
// batch whose output has too few tiles to fill the GPU, none otherwise), then x's split (an fp16
// pair per element: one float's bytes) and its row shifts, made on every call. w's split is kept
// from call to call in a buffer the caller holds for each weight (p.w_split, w_split_floats), with
// a record of each row it was split from, its hash: the pass reads each row of w and splits again
// only the rows whose hash changed (f16x3_split_kernel). An unchanged w costs one read of it a
// call, where splitting it read it and wrote as many bytes again (docs/perf.md, session 50); none
// where the caller vouches that the kept split is current (p.w_split_current: the emitted file
// trusts torch's version counter where its user said so), and w's pass is not launched.
//
// Split-K (both mainloops): WgmmaWsGemm's, with SplitK's partials, counters and fixed-order sum
// (gemm_wgmma_ws.cuh). Each CTA of a tile sums its range of k-tiles and scales its partial back to
// the operands' scale (by powers of two: exact where the result is a normal number, so the sum of
// the scaled partials is the scaled sum of the unscaled ones, rounding for rounding), the last CTA
// adds the partials in k order and runs the epilogue. One split is the unsplit kernel's work.
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

// w's split kept from call to call (WgmmaWsF16x3Gemm::w_split_floats): beside each row's hi, lo
// and shift, a record of the row it was split from. A row whose hash matches its record is not
// split again; any other is, and its record rewritten. Zeros (a new cache): no row recorded.
struct SplitRowRecord {
  uint32_t sum;                  // the row's hash: the sum of its elements' terms (hash_term)
  uint32_t tag;                  // kSplitRowTag once the row has been split
  unsigned long long squares;    // and the sum of their squares (64-bit)
};
constexpr uint32_t kSplitRowTag = 0x6b67656eu;

// One element's term in its row's hash, for the element's bits at column c: for each c a
// bijection of the bits (a xorshift, an offset by c, then murmur3's 32-bit finalizer), so that
// one changed element always changes its term. The row's hash is two sums, of the terms and of
// their squares: more changes go unseen only where both sums cancel (about 2^-64 for terms that
// behave as random ones). Why a hash and not the tensor's version counter: writes through
// `w.data` (an optimizer of old, EMA code, weight tying, a collective that fills the tensor) leave
// the counter as it was; reading w once costs half of splitting it (it writes 4 bytes a element).
__device__ __forceinline__ uint32_t hash_term(uint32_t bits, uint32_t c) {
  uint32_t h = (bits ^ (bits >> 16)) + c * 0x9e3779b9u;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

// A row's largest finite magnitude and, where kHash, its hash, element by element (quad i's
// elements are columns 4i .. 4i + 3).
struct RowSums {
  float amax = 0.f;
  uint32_t sum = 0;
  unsigned long long squares = 0;
};
template <bool kHash>
struct RowScan : RowSums {
  // (fmaxf drops a NaN, and an infinity does not count: the largest finite magnitude.)
  __device__ __forceinline__ void take(const float4& v, int i) {
    amax = fmaxf(amax, isinf(v.x) ? 0.f : fabsf(v.x));
    amax = fmaxf(amax, isinf(v.y) ? 0.f : fabsf(v.y));
    amax = fmaxf(amax, isinf(v.z) ? 0.f : fabsf(v.z));
    amax = fmaxf(amax, isinf(v.w) ? 0.f : fabsf(v.w));
    if constexpr (kHash) {
      const uint32_t c = 4u * static_cast<uint32_t>(i);
      const uint32_t t[4] = {hash_term(__float_as_uint(v.x), c), hash_term(__float_as_uint(v.y), c + 1),
                             hash_term(__float_as_uint(v.z), c + 2), hash_term(__float_as_uint(v.w), c + 3)};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sum += t[j];
        squares += static_cast<unsigned long long>(t[j]) * t[j];
      }
    }
  }
  // The row: the quads a held row's thread holds, else streamed from src. (A loop of its own
  // after the loads: with the hash's branch among them the pass ran slower, x's rows too, which
  // hash nothing; fewer loads in flight the likely cause, not read in the machine code:
  // docs/perf.md, session 50, calls A and C.)
  __device__ __forceinline__ void row(const float4 (&held)[kHeldQuads], const float4* src, int quads, bool held_row) {
    if (held_row) {
#pragma unroll
      for (int r = 0; r < kHeldQuads; ++r) {
        const int i = threadIdx.x + r * kSplitThreads;
        if (i < quads) take(held[r], i);
      }
    } else {
      for (int i = threadIdx.x; i < quads; i += kSplitThreads) take(src[i], i);
    }
  }
  // The block's: every thread gets them (two barriers; `shared` the block's scratch).
  __device__ __forceinline__ void reduce(RowSums* shared) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      if constexpr (kHash) {
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        squares += __shfl_xor_sync(0xffffffffu, squares, o);
      }
    }
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = *this;
    __syncthreads();
    static_cast<RowSums&>(*this) = shared[0];
#pragma unroll
    for (int w = 1; w < kSplitThreads / 32; ++w) {
      amax = fmaxf(amax, shared[w].amax);
      sum += shared[w].sum;
      squares += shared[w].squares;
    }
    __syncthreads();   // (the scratch may be written again)
  }
};

// v 2^shift as fp16 hi and lo. An infinity: hi the largest finite fp16 of its sign and lo the
// infinity, so that every product with a nonzero element of the other operand is infinite (its
// hi or its lo is nonzero) and one with a zero is NaN, as in fp32 (tf32x3's clamp,
// mma_detail.cuh).
__device__ __forceinline__ void split_value(float v, int shift, __half& h, __half& l) {
  const float s = ldexpf(v, shift);
  if (isinf(s)) {
    h = __float2half_rn(copysignf(65504.f, s));
    l = __float2half_rn(s);
  } else {
    h = __float2half_rn(s);
    l = __float2half_rn(s - __half2float(h));
  }
}
// Quad i of a row (columns 4i .. 4i + 3), split, into the row's hi and lo.
__device__ __forceinline__ void store_split(uint2* hi, uint2* lo, int i, const float4& v, int shift) {
  __half h[4], l[4];
  split_value(v.x, shift, h[0], l[0]);
  split_value(v.y, shift, h[1], l[1]);
  split_value(v.z, shift, h[2], l[2]);
  split_value(v.w, shift, h[3], l[3]);
  hi[i] = *reinterpret_cast<const uint2*>(h);
  lo[i] = *reinterpret_cast<const uint2*>(l);
}
// 2^(14 - floor(log2 m)) for a row's largest finite magnitude m: m 2^shift in [2^14, 2^15); a row
// of zeros keeps its scale. At most 126 (a row below 2^-112, fp32's smallest numbers, lands
// lower), so that the GEMM's way back, 2^-(shift_x + shift_w), is two normal powers of two
// (scale_back).
__device__ __forceinline__ int row_shift(float amax) { return amax > 0.f ? min(14 - ilogbf(amax), 126) : 0; }

// The rows of v [rows][K] (one block per row): each row's shift, then its hi and lo halves.
// K % 4 == 0 and 16-byte aligned rows (the GEMM's launch contract). kKept (w's kept split, a
// record per row in kept): a row whose hash matches its record is left as it is. A launch for
// each operand, x's without the hash's code (one launch for both measured the same: calls C and
// D; x's pass as fast as session 49's, call F, docs/perf.md, session 50).
template <bool kKept>
__global__ void __launch_bounds__(kSplitThreads)
    f16x3_split_kernel(const float* __restrict__ v, int K, __half* __restrict__ hi_v, __half* __restrict__ lo_v,
                       int* __restrict__ shift_v, SplitRowRecord* __restrict__ kept) {
  const long long row = blockIdx.x;
  // (The record's load issued first, so that its latency passes while the row arrives.)
  SplitRowRecord was{};
  if constexpr (kKept) was = kept[row];
  const float4* src = reinterpret_cast<const float4*>(v + row * K);
  const int quads = K / 4;
  const bool held_row = quads <= kHeldQuads * kSplitThreads;
  float4 held[kHeldQuads];
  if (held_row) {
#pragma unroll
    for (int r = 0; r < kHeldQuads; ++r) {
      const int i = threadIdx.x + r * kSplitThreads;
      held[r] = i < quads ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  __shared__ RowSums scratch[kSplitThreads / 32];
  RowScan<kKept> scan;
  scan.row(held, src, quads, held_row);
  scan.reduce(scratch);
  if constexpr (kKept) {
    if (was.tag == kSplitRowTag && was.sum == scan.sum && was.squares == scan.squares) return;
  }
  const int shift = row_shift(scan.amax);
  if (threadIdx.x == 0) shift_v[row] = shift;
  uint2* hi = reinterpret_cast<uint2*>(hi_v + row * K);
  uint2* lo = reinterpret_cast<uint2*>(lo_v + row * K);
  if (held_row) {
#pragma unroll
    for (int r = 0; r < kHeldQuads; ++r) {
      const int i = threadIdx.x + r * kSplitThreads;
      if (i < quads) store_split(hi, lo, i, held[r], shift);
    }
  } else {
    for (int i = threadIdx.x; i < quads; i += kSplitThreads) store_split(hi, lo, i, src[i], shift);
  }
  if constexpr (kKept) {
    // The record last, after the row's halves and shift are visible: a pass on another stream
    // that finds it (the same weight used from two streams) finds the halves it stands for, and
    // one that does not splits the row again, to the same values.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      kept[row] = SplitRowRecord{scan.sum, kSplitRowTag, scan.squares};
    }
  }
}

// Short rows of x (at most 32 kHeld quads: K <= 1024 for 8, 2048 for 16): a warp a row,
// kSplitThreads / 32 rows a block, each lane holding its quads. A block a row left three quarters
// of its threads idle at K = 256 and waited at two barriers a row: x's pass at 16384 x 256 took
// 45 us, at 8192 x 1024 33 us, for 32 MB and 64 MB moved (docs/perf.md, session 52). The same
// shift and halves as f16x3_split_kernel's, bit for bit (the largest magnitude is order-free).
// (Rows of at most 1024 hold 8 quads a lane, not 16: half the registers, more rows in flight.)
template <int kHeld>
__global__ void __launch_bounds__(kSplitThreads)
    f16x3_split_short_rows_kernel(const float* __restrict__ v, int rows, int K, __half* __restrict__ hi_v,
                                  __half* __restrict__ lo_v, int* __restrict__ shift_v) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * (kSplitThreads / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float4* src = reinterpret_cast<const float4*>(v + row * K);
  const int quads = K / 4;
  float4 held[kHeld];
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int i = lane + 32 * r;
    held[r] = i < quads ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  RowScan<false> scan;
#pragma unroll
  for (int r = 0; r < kHeld; ++r) scan.take(held[r], lane + 32 * r);   // (zeros past K: 0)
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) scan.amax = fmaxf(scan.amax, __shfl_xor_sync(0xffffffffu, scan.amax, o));
  const int shift = row_shift(scan.amax);
  if (lane == 0) shift_v[row] = shift;
  uint2* hi = reinterpret_cast<uint2*>(hi_v + row * K);
  uint2* lo = reinterpret_cast<uint2*>(lo_v + row * K);
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int i = lane + 32 * r;
    if (i < quads) store_split(hi, lo, i, held[r], shift);
  }
}

// x's pass: its rows' shifts and halves, by the kernel for its row length.
inline cudaError_t split_x(const float* x, int M, int K, __half* xh, __half* xl, int* shift_x, cudaStream_t stream) {
  constexpr int rows_per_block = kSplitThreads / 32;
  const int blocks = (M + rows_per_block - 1) / rows_per_block;
  if (K / 4 <= 32 * 8) {
    f16x3_split_short_rows_kernel<8><<<blocks, kSplitThreads, 0, stream>>>(x, M, K, xh, xl, shift_x);
  } else if (K / 4 <= 32 * 16) {
    f16x3_split_short_rows_kernel<16><<<blocks, kSplitThreads, 0, stream>>>(x, M, K, xh, xl, shift_x);
  } else {
    f16x3_split_kernel<false><<<M, kSplitThreads, 0, stream>>>(x, K, xh, xl, shift_x, nullptr);
  }
  return cudaGetLastError();
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
                       EpilogueParams p, int splits) {
  Gemm::template run<EPI>(&map_xh, &map_xl, &map_wh, &map_wl, shift_x, shift_w, M, N, K, p, splits);
}

// The GEMM with one operand split in registers (run_in_registers): A fp32, B split by the pass
// (x's halves where kWIsA, w's kept split otherwise), shift_b B's row shifts.
template <class Gemm, class EPI, bool kWIsA>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    wgmma_f16x3_in_registers_kernel(const __grid_constant__ CUtensorMap map_a,
                                    const __grid_constant__ CUtensorMap map_bh,
                                    const __grid_constant__ CUtensorMap map_bl,
                                    const int* __restrict__ shift_b, int M, int N, int K, EpilogueParams p,
                                    int splits) {
  Gemm::template run_in_registers<EPI, kWIsA>(&map_a, &map_bh, &map_bl, shift_b, M, N, K, p, splits);
}

// 2^e as a float, exact, for e in [-126, 127].
__device__ __forceinline__ float pow2(int e) { return __int_as_float((e + 127) << 23); }

// hi and lo of two scaled fp32 elements as fp16x2 pairs (the lower k in the low half), as
// f16x3_split_kernel splits: lo = v - hi exact in fp32; an infinity keeps hi the largest finite
// fp16 of its sign and lo the infinity (a NaN goes through lo).
__device__ __forceinline__ void split_pair(float a, float b, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(fminf(fmaxf(a, -65504.f), 65504.f), fminf(fmaxf(b, -65504.f), 65504.f));
  const float2 back = __half22float2(h);
  const __half2 l = __floats2half2_rn(a - back.x, b - back.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

}  // namespace f16x3_detail

// KGEN_F16X3_W_IN_REGISTERS: square tiles split w in the GEMM's registers at batches of at most
// W_IN_REGISTERS_MAX_ROWS (on by default); a file's source defining it 0 first runs the split
// pass over w at every batch (an A/B comparison).
#ifndef KGEN_F16X3_W_IN_REGISTERS
#define KGEN_F16X3_W_IN_REGISTERS 1
#endif
// KGEN_F16X3_X_IN_REGISTERS: outputs no wider than a tile (N <= BN) split x in the GEMM's
// registers (on by default); a file's source defining it 0 runs x's pass there (an A/B comparison).
#ifndef KGEN_F16X3_X_IN_REGISTERS
#define KGEN_F16X3_X_IN_REGISTERS 1
#endif

// W_IN_REGISTERS_MAX_ROWS (spec.FP16X3_W_IN_REGISTERS_MAX_ROWS): the largest batch at which a square
// tile splits w in registers rather than in the pass (0: never).
template <int BM, int BN, int STAGES, int FLUSH, int GROUP_M, int W_IN_REGISTERS_MAX_ROWS = 0>
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
  // w in registers (square tiles): A's stage holds w's fp32 BM x 64 (two 128-byte boxes), the
  // bytes of A's hi and lo.
  static constexpr bool kSquare = BM == BN;
  static constexpr bool kWInRegisters = KGEN_F16X3_W_IN_REGISTERS && kSquare && W_IN_REGISTERS_MAX_ROWS > 0;
  static constexpr int kBarrierBytes = ws_detail::TmaStages<STAGES>::kBarrierBytes;
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
  static_assert(!kSquare || BM * (BM + 4) * 4 <= kPipeBytes, "the transposed tile must fit in the pipeline buffers");
  static_assert(2 * kABytes == BM * 64 * 4, "A's stage must hold its BM rows of 64 fp32 k (an operand in registers)");

  // The k-splits per tile at this shape and the workspace floats they need: WgmmaWsGemm's rule
  // (SplitK::splits_at) over this GEMM's k-tiles of 64 k (K % 8 != 0 runs tf32x3's GEMM instead).
  static int splits_for(int M, int N, int K) { return SplitK<BM, BN>::template splits_at<BK>(M, N, K, K % 8 == 0); }
  static long long splitk_floats(int M, int N, int K) {
    return SplitK<BM, BN>::template floats_at<BK>(M, N, K, K % 8 == 0);
  }

  // The workspace, in floats: split-K's partials (none where the GEMM runs unsplit: then the
  // layout is what it was before split-K), x's halves (two per element: one float's bytes), then
  // x's row shifts, each part rounded up to 64 floats (TMA reads 16-byte aligned rows). split-K's
  // counters and partials come first, at the workspace's start, where SplitK::combine reads them
  // (p.split_partials), as in WgmmaWsGemm.
  static long long round64(long long f) { return (f + 63) / 64 * 64; }
  static long long x_halves_offset(int M, int N, int K) { return round64(splitk_floats(M, N, K)); }
  static long long shift_x_offset(int M, int N, int K) {
    return x_halves_offset(M, N, K) + round64(static_cast<long long>(M) * K);
  }
  // Whether a batch of M rows splits w in registers (where the caller hands the GEMM no kept split
  // of w): where w's pass costs more than the slower GEMM (spec.FP16X3_W_IN_REGISTERS_MAX_ROWS;
  // docs/perf.md, sessions 22 and 51).
  static constexpr bool w_in_registers(int M) { return kWInRegisters && M <= W_IN_REGISTERS_MAX_ROWS; }
  // Whether the batch splits x in registers: where the output is no wider than a tile, each element
  // of x is read by one column of CTAs only, and its pass (8 bytes moved a element, then the
  // GEMM's 4) cost more than the GEMM itself: at 8192 x 1024 -> 16, 19.4 of 43.5 us (docs/perf.md,
  // session 53). With x in registers the GEMM reads x's 4 bytes a element once, w's kept split
  // beside it. Not where the launch has fewer work units (tiles times k-splits) than a
  // kXInRegistersSmShare-th of the GPU's SMs: there each CTA's mainloop sets the time, and the
  // pass's, which does not split and then wait for its products every k-tile, is the faster
  // (1024 x 1024 -> 32, 16 units of 64x64: 18.1 us against the pass's 15.5; 8192 x 1024 -> 16, 64
  // units of 128x64: 23.8 against 34.3; session 53, call B).
  static constexpr int kXInRegistersSmShare = 4;
  static bool x_in_registers(int M, int N, int K) {
    if (!KGEN_F16X3_X_IN_REGISTERS || N > BN || w_in_registers(M) || M <= SkinnyGemm<float>::kMaxRows) return false;
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<BM, BN>(M, N, K, tiles, e)) return false;
    return static_cast<long long>(kXInRegistersSmShare) * tiles * splits_for(M, N, K) >= ws_detail::sm_count();
  }
  static long long split_floats(int M, int N, int K) {
    if (M <= SkinnyGemm<float>::kMaxRows) return 0;
    if (x_in_registers(M, N, K)) return x_halves_offset(M, N, K);   // (split-K's partials alone)
    return shift_x_offset(M, N, K) + round64(M);
  }
  // w's split, kept by the caller from call to call for each weight (p.w_split; entry.cuh,
  // w_split_floats): a SplitRowRecord per row (four floats' bytes; zeros: no row recorded, so
  // that a caller starting a split zeroes w_split_records_floats of them only), then w's halves
  // and its row shifts. Where the GEMM reads w's split: not with w in registers, unless the caller
  // hands it one there (trusted_w_split_floats).
  static long long w_split_records_floats(int M, int N, int K) {
    return M <= SkinnyGemm<float>::kMaxRows ? 0 : round64(4LL * N);
  }
  static long long w_split_floats(int M, int N, int K) {
    return w_in_registers(M) ? 0 : trusted_w_split_floats(M, N, K);
  }
  // At a batch where w is split in registers, a caller that trusts w's version counter may still
  // hand the GEMM a kept split (p.w_split): read as fp16 halves, w costs the bytes the registers'
  // fp32 read does, without the split's arithmetic in the mainloop (docs/perf.md, session 51).
  static long long trusted_w_split_floats(int M, int N, int K) {
    if (M <= SkinnyGemm<float>::kMaxRows) return 0;
    return w_split_records_floats(M, N, K) + round64(static_cast<long long>(N) * K) + round64(N);
  }

  template <class EPI>
  static cudaError_t launch(const float* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                            cudaStream_t stream) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<BM, BN>(M, N, K, tiles, e)) return e;
    if (SkinnyGemm<float>::applies(x, w, M, N, K)) return SkinnyGemm<float>::template launch<EPI>(x, w, M, N, K, p, stream);
    // fp16 rows need a 16-byte pitch for TMA; the workspace holds x's split (p.w_split w's) and
    // split-K's partials (with x in registers, those alone: split_floats).
    const int splits = splits_for(M, N, K);
    if (K % 8 != 0 || K == 0) return cudaErrorInvalidValue;
    const bool x_split_in_registers = x_in_registers(M, N, K);
    if (p.split_partials == nullptr && (splits > 1 || !x_split_in_registers)) return cudaErrorInvalidValue;
    float* const ws = p.split_partials;
    constexpr CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    // Split-K: the tiles' counters zeroed (the partials need nothing: each is written before it
    // is read), the CTAs of split s blocks [s * tiles, (s + 1) * tiles).
    if (splits > 1) {
      e = cudaMemsetAsync(ws, 0, tiles * sizeof(unsigned int), stream);
      if (e != cudaSuccess) return e;
    }
    if constexpr (kWInRegisters) {
      if (w_in_registers(M) && p.w_split == nullptr) {
        __half* const xh = reinterpret_cast<__half*>(ws + x_halves_offset(M, N, K));
        __half* const xl = xh + static_cast<long long>(M) * K;
        int* const shift_x = reinterpret_cast<int*>(ws + shift_x_offset(M, N, K));
        e = f16x3_detail::split_x(x, M, K, xh, xl, shift_x, stream);
        if (e != cudaSuccess) return e;
        CUtensorMap map_w, map_xh, map_xl;
        e = ws_detail::make_kmajor_map(&map_w, w, N, K, BM);   // fp32, 32 k a box
        if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_xh, xh, type, 2, M, K, BN);
        if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_xl, xl, type, 2, M, K, BN);
        if (e != cudaSuccess) return e;
        const auto kernel = f16x3_detail::wgmma_f16x3_in_registers_kernel<WgmmaWsF16x3Gemm, EPI, true>;
        e = allow_dynamic_smem<f16x3_detail::wgmma_f16x3_in_registers_kernel<WgmmaWsF16x3Gemm, EPI, true>>(kSmemBytes);
        if (e != cudaSuccess) return e;
        kernel<<<tiles * splits, kThreads, kSmemBytes, stream>>>(map_w, map_xh, map_xl, shift_x, M, N, K, p, splits);
        return cudaGetLastError();
      }
    }
    // (w's kept split: the caller's, sized by w_split_floats.)
    if (p.w_split == nullptr) return cudaErrorInvalidValue;
    auto* const kept_w = reinterpret_cast<f16x3_detail::SplitRowRecord*>(p.w_split);
    __half* const wh = reinterpret_cast<__half*>(p.w_split + w_split_records_floats(M, N, K));
    __half* const wl = wh + static_cast<long long>(N) * K;
    int* const shift_w = reinterpret_cast<int*>(p.w_split + w_split_records_floats(M, N, K) +
                                                round64(static_cast<long long>(N) * K));
    if (!p.w_split_current) {
      f16x3_detail::f16x3_split_kernel<true><<<N, f16x3_detail::kSplitThreads, 0, stream>>>(w, K, wh, wl, shift_w, kept_w);
      e = cudaGetLastError();
      if (e != cudaSuccess) return e;
    }
    if (x_split_in_registers) {
      CUtensorMap map_x, map_wh, map_wl;
      e = ws_detail::make_kmajor_map(&map_x, x, M, K, BM);   // fp32, 32 k a box
      if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wh, wh, type, 2, N, K, BN);
      if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wl, wl, type, 2, N, K, BN);
      if (e != cudaSuccess) return e;
      const auto kernel = f16x3_detail::wgmma_f16x3_in_registers_kernel<WgmmaWsF16x3Gemm, EPI, false>;
      e = allow_dynamic_smem<f16x3_detail::wgmma_f16x3_in_registers_kernel<WgmmaWsF16x3Gemm, EPI, false>>(kSmemBytes);
      if (e != cudaSuccess) return e;
      kernel<<<tiles * splits, kThreads, kSmemBytes, stream>>>(map_x, map_wh, map_wl, shift_w, M, N, K, p, splits);
      return cudaGetLastError();
    }
    __half* const xh = reinterpret_cast<__half*>(ws + x_halves_offset(M, N, K));
    __half* const xl = xh + static_cast<long long>(M) * K;
    int* const shift_x = reinterpret_cast<int*>(ws + shift_x_offset(M, N, K));
    e = f16x3_detail::split_x(x, M, K, xh, xl, shift_x, stream);
    if (e != cudaSuccess) return e;
    CUtensorMap map_xh, map_xl, map_wh, map_wl;
    e = ws_detail::make_kmajor_map(&map_xh, xh, type, 2, M, K, BM);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_xl, xl, type, 2, M, K, BM);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wh, wh, type, 2, N, K, BN);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_wl, wl, type, 2, N, K, BN);
    if (e != cudaSuccess) return e;
    const auto kernel = f16x3_detail::wgmma_f16x3_kernel<WgmmaWsF16x3Gemm, EPI>;
    e = allow_dynamic_smem<f16x3_detail::wgmma_f16x3_kernel<WgmmaWsF16x3Gemm, EPI>>(kSmemBytes);
    if (e != cudaSuccess) return e;
    kernel<<<tiles * splits, kThreads, kSmemBytes, stream>>>(map_xh, map_xl, map_wh, map_wl, shift_x, shift_w, M, N, K,
                                                             p, splits);
    return cudaGetLastError();
  }

  template <class EPI>
  __device__ static __forceinline__ void run(const CUtensorMap* map_xh, const CUtensorMap* map_xl,
                                             const CUtensorMap* map_wh, const CUtensorMap* map_wl,
                                             const int* shift_x, const int* shift_w, int M, int N, int K,
                                             const EpilogueParams& p, int splits) {
    using Mma = half_detail::Wgmma16<__half, BN>;
    extern __shared__ __align__(1024) unsigned char kgen_wgmma_f16x3_smem[];
    const int tiles_m = M / BM + (M % BM != 0);
    const int tiles_n = N / BN + (N % BN != 0);
    // Split-K: the CTAs of split s are blocks [s * tiles, (s + 1) * tiles); split s sums
    // k-tiles [k_first, k_first + k_tiles).
    const int tiles = tiles_m * tiles_n;
    const int tile = static_cast<int>(blockIdx.x) % tiles;
    const int split = static_cast<int>(blockIdx.x) / tiles;
    int tile_m, tile_n;
    raster_tile<GROUP_M>(tiles_m, tiles_n, tile_m, tile_n, tile);
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;
    const int k_all = K / BK + (K % BK != 0);
    const int k_first = static_cast<int>(static_cast<long long>(split) * k_all / splits);
    const int k_tiles = static_cast<int>(static_cast<long long>(split + 1) * k_all / splits) - k_first;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wg = warp >> 2;

    const auto pipe = ws_detail::TmaStages<STAGES>::init(kgen_wgmma_f16x3_smem, kBufferBytes, 4 * kConsumers);
    const uint32_t smem = pipe.smem;
    unsigned char* const smem_ptr = pipe.ptr;
    auto a_hi = [&](int s) { return smem + s * kStageBytes; };
    auto a_lo = [&](int s) { return smem + s * kStageBytes + kABytes; };
    auto b_hi = [&](int s) { return smem + s * kStageBytes + 2 * kABytes; };
    auto b_lo = [&](int s) { return smem + s * kStageBytes + 2 * kABytes + kBBytes; };

    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;

    if (wg == 0) {
      if (tid == 0) {
        pipe.produce(k_tiles, 2 * (kABytes + kBBytes), [&](int s, int kt) {
          const int k0 = (k_first + kt) * BK;
          ws_detail::tma_load(a_hi(s), map_xh, pipe.full(s), k0, m0);
          ws_detail::tma_load(a_lo(s), map_xl, pipe.full(s), k0, m0);
          ws_detail::tma_load(b_hi(s), map_wh, pipe.full(s), k0, n0);
          ws_detail::tma_load(b_lo(s), map_wl, pipe.full(s), k0, n0);
        });
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
        ws_detail::mbar_wait(pipe.full(s), (kt / STAGES) & 1);
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
          if (lane == 0) ws_detail::mbar_arrive(pipe.empty((kt - 1) % STAGES));
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
    // Split-K: the last CTA of the tile adds the (scaled) partials in k order; the others are done.
    if (splits > 1 && !SplitK<BM, BN>::combine(acc, p.split_partials, tile, tiles, split, splits,
                                               *reinterpret_cast<int*>(smem_ptr))) {
      return;
    }
    // Every stage the producer filled has been consumed: the pipeline buffers are free for the
    // epilogue's scratch and tile.
    WsEpilogue<BM, BN>::template run<EPI>(acc, reinterpret_cast<float*>(smem_ptr), m0, n0, M, N, p);
  }

  // The GEMM with an operand split in registers, A: its BM rows fp32 from shared memory, split a
  // k-tile at a time, B's BN rows split by the pass. kWIsA (w in registers, kWInRegisters; see the
  // header): A = w's rows from n0, B = x's from m0, the accumulators z's tile transposed until the
  // end. Otherwise (x in registers, x_in_registers): A = x's rows from m0, B = w's kept split from
  // n0, the accumulators z's tile.
  template <class EPI, bool kWIsA>
  __device__ static __forceinline__ void run_in_registers(const CUtensorMap* map_a, const CUtensorMap* map_bh,
                                                          const CUtensorMap* map_bl, const int* shift_b,
                                                          int M, int N, int K, const EpilogueParams& p,
                                                          int splits) {
    using Mma = half_detail::Wgmma16<__half, BN>;
    extern __shared__ __align__(1024) unsigned char kgen_wgmma_f16x3_smem[];
    // Tiles: rows of z (x's) by B's BN or A's BM, columns (w's rows) by the other. Split-K as in run.
    constexpr int kTileRows = kWIsA ? BN : BM;
    constexpr int kTileCols = kWIsA ? BM : BN;
    const int tiles_m = M / kTileRows + (M % kTileRows != 0);
    const int tiles_n = N / kTileCols + (N % kTileCols != 0);
    const int tiles = tiles_m * tiles_n;
    const int tile = static_cast<int>(blockIdx.x) % tiles;
    const int split = static_cast<int>(blockIdx.x) / tiles;
    int tile_m, tile_n;
    raster_tile<GROUP_M>(tiles_m, tiles_n, tile_m, tile_n, tile);
    const int m0 = tile_m * kTileRows;
    const int n0 = tile_n * kTileCols;
    const int a0 = kWIsA ? n0 : m0;   // A's first row, and B's
    const int b0 = kWIsA ? m0 : n0;
    const int k_all = K / BK + (K % BK != 0);
    const int k_first = static_cast<int>(static_cast<long long>(split) * k_all / splits);
    const int k_tiles = static_cast<int>(static_cast<long long>(split + 1) * k_all / splits) - k_first;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wg = warp >> 2;

    const auto pipe = ws_detail::TmaStages<STAGES>::init(kgen_wgmma_f16x3_smem, kBufferBytes, 4 * kConsumers);
    const uint32_t smem = pipe.smem;
    unsigned char* const smem_ptr = pipe.ptr;
    // A's stage: two boxes of BM rows x 32 floats (128 swizzled bytes a row), k 0-31 then 32-63.
    auto a_box = [&](int s, int box) { return smem + s * kStageBytes + box * BM * 128; };
    auto b_hi = [&](int s) { return smem + s * kStageBytes + 2 * kABytes; };
    auto b_lo = [&](int s) { return smem + s * kStageBytes + 2 * kABytes + kBBytes; };
    auto generic = [&](uint32_t addr) { return smem_ptr + (addr - smem); };

    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;

    if (wg == 0) {
      if (tid == 0) {
        pipe.produce(k_tiles, 2 * (kABytes + kBBytes), [&](int s, int kt) {
          const int k0 = (k_first + kt) * BK;
          ws_detail::tma_load(a_box(s, 0), map_a, pipe.full(s), k0, a0);
          ws_detail::tma_load(a_box(s, 1), map_a, pipe.full(s), k0 + 32, a0);
          ws_detail::tma_load(b_hi(s), map_bh, pipe.full(s), k0, b0);
          ws_detail::tma_load(b_lo(s), map_bl, pipe.full(s), k0, b0);
        });
      }
    } else {
      const int cwg = wg - 1;
      const int q = lane & 3;
      // The thread's two rows of A's tile (the A fragment's rows, and its accumulators').
      const int r0 = cwg * 64 + (warp & 3) * 16 + (lane >> 2);
      const int r1 = r0 + 8;
      float part[kAccRegs];
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        const uint32_t parity = (kt / STAGES) & 1;
        ws_detail::mbar_wait(pipe.full(s), parity);
        // The A fragment's fp32 elements at k 16 ks + 2q (+1) and 8 more, rows r0 and r1: in A's
        // swizzled box ks / 2, chunk 4 (ks % 2) + q / 2 (+2), half q % 2 of it.
        auto at = [&](int ks, int r, int dk) {
          const float* box = reinterpret_cast<const float*>(generic(a_box(s, ks >> 1)));
          const int chunk = 4 * (ks & 1) + (q >> 1) + dk;
          return *reinterpret_cast<const float2*>(box + r * 32 + 4 * (chunk ^ (r & 7)) + 2 * (q & 1));
        };
        // Each row's largest finite magnitude in the k-tile: the quad's four threads hold its 64
        // elements (a read of the stage before the one that splits; fmaxf drops a NaN).
        float amax0 = 0.f, amax1 = 0.f;
        auto take = [](float m, float2 v) {
          const float a = fabsf(v.x), b = fabsf(v.y);
          return fmaxf(m, fmaxf(a != INFINITY ? a : 0.f, b != INFINITY ? b : 0.f));
        };
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          amax0 = take(take(amax0, at(ks, r0, 0)), at(ks, r0, 2));
          amax1 = take(take(amax1, at(ks, r1, 0)), at(ks, r1, 2));
        }
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1) {
          amax0 = fmaxf(amax0, __shfl_xor_sync(0xffffffffu, amax0, o));
          amax1 = fmaxf(amax1, __shfl_xor_sync(0xffffffffu, amax1, o));
        }
        // 2^shift puts the largest in [2^14, 2^15), as f16x3_split_kernel's row shifts do.
        const int e0 = amax0 > 0.f ? min(14 - ilogbf(amax0), 126) : 0;
        const int e1 = amax1 > 0.f ? min(14 - ilogbf(amax1), 126) : 0;
        const float up0 = f16x3_detail::pow2(e0), up1 = f16x3_detail::pow2(e1);
        const uint64_t bh = wgmma_detail::sw128_desc(b_hi(s));
        const uint64_t bl = wgmma_detail::sw128_desc(b_lo(s));
        uint32_t hi[kKSteps][4], lo[kKSteps][4];
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          const float2 v00 = at(ks, r0, 0), v10 = at(ks, r1, 0), v01 = at(ks, r0, 2), v11 = at(ks, r1, 2);
          f16x3_detail::split_pair(v00.x * up0, v00.y * up0, hi[ks][0], lo[ks][0]);
          f16x3_detail::split_pair(v10.x * up1, v10.y * up1, hi[ks][1], lo[ks][1]);
          f16x3_detail::split_pair(v01.x * up0, v01.y * up0, hi[ks][2], lo[ks][2]);
          f16x3_detail::split_pair(v11.x * up1, v11.y * up1, hi[ks][3], lo[ks][3]);
        }
        wgmma_detail::fence();
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          const uint64_t k_off = static_cast<uint64_t>(ks * 2);
          Mma::mma(part, lo[ks], bh + k_off, ks == 0 ? 0 : 1);
          Mma::mma(part, hi[ks], bl + k_off, 1);
          Mma::mma(part, hi[ks], bh + k_off, 1);
        }
        wgmma_detail::commit();
        wgmma_detail::wait<0>();
        // The stage is read: the producer may refill it.
        __syncwarp();
        if (lane == 0) ws_detail::mbar_arrive(pipe.empty(s));
        wgmma_detail::fence_regs(part);
        const float down0 = f16x3_detail::pow2(-e0), down1 = f16x3_detail::pow2(-e1);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[4 * j + e] += part[4 * j + e] * (e < 2 ? down0 : down1);
        }
      }
      wgmma_detail::wait<0>();
      wgmma_detail::fence_regs(acc);
      if constexpr (kWIsA) {
        transpose_acc<BM, BN>(acc, reinterpret_cast<float*>(smem_ptr));
        // Back to x's scale: 2^-shift_x[row], exact (shift_x in [-113, 126]).
        const int r = m0 + cwg * 64 + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = r + 8 * h;
          const float down = f16x3_detail::pow2(row < M ? -shift_b[row] : 0);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            acc[4 * j + 2 * h] *= down;
            acc[4 * j + 2 * h + 1] *= down;
          }
        }
      } else {
        // Back to w's scale: 2^-shift_w[col], exact (shift_w in [-113, 126]).
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = n0 + 8 * j + 2 * (lane & 3) + e;
            const float down = f16x3_detail::pow2(col < N ? -shift_b[col] : 0);
            acc[4 * j + e] *= down;
            acc[4 * j + 2 + e] *= down;
          }
        }
      }
    }
    // Split-K: the last CTA of the tile adds the (scaled) partials in k order; the others are done.
    if (splits > 1 && !SplitK<BM, BN>::combine(acc, p.split_partials, tile, tiles, split, splits,
                                               *reinterpret_cast<int*>(smem_ptr))) {
      return;
    }
    // Every stage the producer filled has been consumed: the pipeline buffers are free for the
    // epilogue's scratch and tile.
    WsEpilogue<BM, BN>::template run<EPI>(acc, reinterpret_cast<float*>(smem_ptr), m0, n0, M, N, p);
  }
};

}  // namespace kgen
