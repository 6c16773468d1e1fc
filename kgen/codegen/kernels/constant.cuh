// An output that rewrites made a constant (kgen/ir/rewrite.py: x - x is 0, and the ops after it
// fold), with torch's NaN kept: torch's x - x is NaN where x is not finite, so the output is
// Reads::kNonFiniteValue (what the ops after x - x make of NaN) in row m where x's row m holds a
// NaN or an infinity, and in every row where W or a parameter the dropped chain read does
// (Reads: the generated kgen_cfg::ConstantReads, kgen/lower/forward.py), the constant elsewhere.
// One read of W and the parameters (a flag, set by any CTA that meets a non-finite element),
// then one CTA per row: it reads x's row and writes the row's outputs. Deterministic (the flag
// only ever goes from 0 to 1).
#pragma once

namespace kgen {

// The bits of an element of x or W (T: float, or the 16-bit float of a bf16 / fp16 build) and
// the mask of its exponent: all ones for NaN and the infinities.
template <class T>
struct FloatBits {
  static_assert(sizeof(T) == 4, "fp32, or a 16-bit float with a specialization below");
  using Word = unsigned int;
  static constexpr Word kExponent = 0x7f800000u;
};
#ifdef __CUDA_BF16_TYPES_EXIST__
template <>
struct FloatBits<__nv_bfloat16> {
  using Word = unsigned short;
  static constexpr Word kExponent = 0x7f80u;
};
#endif
#ifdef __CUDA_FP16_TYPES_EXIST__
template <>
struct FloatBits<__half> {
  using Word = unsigned short;
  static constexpr Word kExponent = 0x7c00u;
};
#endif

template <class T>
__device__ __forceinline__ bool nonfinite_word(typename FloatBits<T>::Word w) {
  return (w & FloatBits<T>::kExponent) == FloatBits<T>::kExponent;
}
// An fp32 value (the parameters, which the emitted file passes in fp32) is NaN or infinite.
__device__ __forceinline__ bool is_nonfinite(float v) { return nonfinite_word<float>(__float_as_uint(v)); }

// Whether any of the 16 bytes of elements of type T in v is NaN or infinite.
template <class T>
__device__ __forceinline__ bool nonfinite_16_bytes(const uint4& v) {
  using Word = typename FloatBits<T>::Word;
  const Word* words = reinterpret_cast<const Word*>(&v);
  bool bad = false;
#pragma unroll
  for (int i = 0; i < static_cast<int>(16 / sizeof(Word)); ++i) bad |= nonfinite_word<T>(words[i]);
  return bad;
}

// Whether one of `count` elements of type T at `data` (16-byte aligned), those of index first,
// first + step, ... (in 16-byte groups), is NaN or infinite.
template <class T>
__device__ __forceinline__ bool any_nonfinite(const T* __restrict__ data, long long count, long long first,
                                              long long step) {
  using Word = typename FloatBits<T>::Word;
  constexpr int kPer = 16 / sizeof(Word);
  const long long vectors = count / kPer;
  const uint4* v = reinterpret_cast<const uint4*>(data);
  bool bad = false;
#pragma unroll 4
  for (long long i = first; i < vectors; i += step) bad |= nonfinite_16_bytes<T>(__ldg(v + i));
  const Word* words = reinterpret_cast<const Word*>(data);
  for (long long i = vectors * kPer + first; i < count; i += step) bad |= nonfinite_word<T>(words[i]);
  return bad;
}

constexpr int kConstantThreads = 256;
constexpr long long kConstantMaxBlocks = 2048;

// *flag = 1 if W (N x K, when Reads::kReadsGemm) or a parameter Reads reads holds a NaN or an
// infinity; untouched otherwise (the caller zeroes it first).
template <class Reads, class T>
__global__ void constant_flag_kernel(const T* __restrict__ w, long long w_count, EpilogueParams p, int N,
                                     unsigned int* __restrict__ flag) {
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  bool bad = Reads::params_nonfinite(p, N, first, step);
  if (Reads::kReadsGemm) bad |= any_nonfinite<T>(w, w_count, first, step);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1u;
}

// One CTA per row m: out[m][0, width) = nonfinite where x's row m (K elements, when
// Reads::kReadsGemm) holds a NaN or an infinity or *flag is set, else value.
template <class Reads, class T>
__global__ void constant_rows_kernel(const T* __restrict__ x, int K, int width, const unsigned int* __restrict__ flag,
                                     float value, float nonfinite, float* __restrict__ out) {
  using Word = typename FloatBits<T>::Word;
  const long long m = blockIdx.x;
  bool bad = false;
  if (Reads::kReadsGemm) {
    const T* row = x + m * K;
    // (16-byte loads where the rows are 16-byte aligned: x's start is.)
    if (K % static_cast<int>(16 / sizeof(Word)) == 0) {
      bad = any_nonfinite<T>(row, K, threadIdx.x, blockDim.x);
    } else {
      const Word* words = reinterpret_cast<const Word*>(row);
      for (int k = threadIdx.x; k < K; k += blockDim.x) bad |= nonfinite_word<T>(words[k]);
    }
  }
  const float v = (__syncthreads_or(bad) || *flag != 0u) ? nonfinite : value;
  for (int j = threadIdx.x; j < width; j += blockDim.x) out[m * width + j] = v;
}

// The constant output [M][width] (see the top of this file); flag: one word of workspace.
template <class Reads, class T, class W>
cudaError_t launch_constant_output(const T* x, const W* w, int M, int N, int K, const EpilogueParams& p, int width,
                                   float value, unsigned int* flag, float* out, cudaStream_t stream) {
  static_assert(std::is_same<T, W>::value, "x and w of one type (no build reads an fp32 weight beside 16-bit x where a rewrite runs: generator.autocast_gemm_type)");
  cudaError_t err = cudaMemsetAsync(flag, 0, sizeof(unsigned int), stream);
  if (err != cudaSuccess) return err;
  const long long w_count = Reads::kReadsGemm ? static_cast<long long>(N) * K : 0;
  // Enough threads for W's 16-byte groups, or for the largest parameter (N per-feature values,
  // or Reads::kMaxNumel elements of one of another shape).
  const long long items = std::max<long long>(std::max<long long>(w_count * sizeof(T) / 16, N), Reads::kMaxNumel);
  const long long blocks = std::min<long long>(std::max<long long>((items + kConstantThreads - 1) / kConstantThreads, 1),
                                               kConstantMaxBlocks);
  constant_flag_kernel<Reads, T><<<static_cast<int>(blocks), kConstantThreads, 0, stream>>>(w, w_count, p, N, flag);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  constant_rows_kernel<Reads, T><<<M, kConstantThreads, 0, stream>>>(x, K, width, flag, value,
                                                                     Reads::kNonFiniteValue, out);
  return cudaGetLastError();
}

// out[0, total) = value: an output that rewrites made a constant, where what the dropped
// chain reads cannot make it NaN (Reads::kAny false: no flag, no read of x or W).
__global__ void fill_kernel(float* __restrict__ out, long long total, float value) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total; i += step) {
    out[i] = value;
  }
}

}  // namespace kgen
