// Session 50: the split pass of x's rows, session 49's kernel (old) against session 50's
// (new: f16x3_split_kernel<false>) and a variant (t1: a held row's padding quads taken as zeros,
// no branch), on x 16384 x 4096 (KernelBench 39) and 1024 x 8192 (12): the kernels as the two
// trees' gemm_wgmma_f16x3.cuh have them (34ca91c's and this session's first two-launch version),
// each in a namespace of its own. nvcc -O3 -gencode=arch=compute_90a,code=sm_90a split_bench.cu
#include <cstdio>
#include <cuda_fp16.h>
#include <stdint.h>
namespace old_k { namespace kgen {
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

}  // f16x3_detail
}}  // kgen, old_k
namespace new_k { namespace kgen {
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
  // after the loads: with the hash's branch among them, nvcc kept one load in flight, not eight:
  // the pass ran at two thirds of its speed, docs/perf.md, session 50.)
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

// The rows of v [rows][K] (one block per row): each row's shift, then its hi and lo halves.
// K % 4 == 0 and 16-byte aligned rows (the GEMM's launch contract). kKept (w's kept split, a
// record per row in kept): a row whose hash matches its record is left as it is. A launch for
// each operand, x's without the hash's code: in one kernel the hash's registers (64 a thread, 50
// without) left fewer blocks on an SM for x's rows too (39's x, 16384 rows: ~8 us slower).
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
    if (threadIdx.x == 0) kept[row] = SplitRowRecord{scan.sum, kSplitRowTag, scan.squares};
  }
  const float amax = scan.amax;
  // 2^(14 - floor(log2 m)): m 2^shift in [2^14, 2^15); a row of zeros keeps its scale. At most
  // 126 (a row below 2^-112, fp32's smallest numbers, lands lower), so that the GEMM's way
  // back, 2^-(shift_x + shift_w), is two normal powers of two (scale_back).
  const int shift = amax > 0.f ? min(14 - ilogbf(amax), 126) : 0;
  if (threadIdx.x == 0) shift_v[row] = shift;
  uint2* hi = reinterpret_cast<uint2*>(hi_v + row * K);
  uint2* lo = reinterpret_cast<uint2*>(lo_v + row * K);
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

}  // f16x3_detail
}}  // kgen, new_k
namespace t1_k { namespace kgen {
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
  // after the loads: with the hash's branch among them, nvcc kept one load in flight, not eight:
  // the pass ran at two thirds of its speed, docs/perf.md, session 50.)
  __device__ __forceinline__ void row(const float4 (&held)[kHeldQuads], const float4* src, int quads, bool held_row) {
    if (held_row) {
#pragma unroll
      for (int r = 0; r < kHeldQuads; ++r) {
        const int i = threadIdx.x + r * kSplitThreads;
        if (!kHash || i < quads) take(held[r], i);
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

// The rows of v [rows][K] (one block per row): each row's shift, then its hi and lo halves.
// K % 4 == 0 and 16-byte aligned rows (the GEMM's launch contract). kKept (w's kept split, a
// record per row in kept): a row whose hash matches its record is left as it is. A launch for
// each operand, x's without the hash's code: in one kernel the hash's registers (64 a thread, 50
// without) left fewer blocks on an SM for x's rows too (39's x, 16384 rows: ~8 us slower).
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
    if (threadIdx.x == 0) kept[row] = SplitRowRecord{scan.sum, kSplitRowTag, scan.squares};
  }
  const float amax = scan.amax;
  // 2^(14 - floor(log2 m)): m 2^shift in [2^14, 2^15); a row of zeros keeps its scale. At most
  // 126 (a row below 2^-112, fp32's smallest numbers, lands lower), so that the GEMM's way
  // back, 2^-(shift_x + shift_w), is two normal powers of two (scale_back).
  const int shift = amax > 0.f ? min(14 - ilogbf(amax), 126) : 0;
  if (threadIdx.x == 0) shift_v[row] = shift;
  uint2* hi = reinterpret_cast<uint2*>(hi_v + row * K);
  uint2* lo = reinterpret_cast<uint2*>(lo_v + row * K);
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

}  // f16x3_detail
}}  // kgen, t1_k
template <class F> float time_it(F launch) {
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
