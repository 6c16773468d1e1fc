// A row sum of the GEMM output as a matrix-vector product (kgen/ir/rewrite.py, row_sum_of_gemm):
// the kernels of a part that the rewrite left without a GEMM.
//
// Follows common.cuh and stages.cuh (concatenated before this file; not included here): it uses
// the row kernels' block_sum and kRowThreads.
//
// x and W are read in the module's dtype T (fp32, or bf16 / fp16 in a 16-bit build: the
// kernels are templates on it), every sum in fp32. A 16-bit module's eager rounds each z[m][n]
// to its dtype before the row sum; the rewrite never forms z, so its row sum carries the fp32
// sums' rounding only (Rows::finish rounds the sum and each op after it as torch's ops round).
// (In fp16 an element of z beyond 65504 is inf in eager and a finite term here.)
#pragma once

namespace kgen {

// sum_n (scale[n] * (x_m . W_n) + shift[n]) = x_m . (sum_n scale[n] W_n) + sum_n shift[n]:
// column sums of the scaled W (read once, in chunks of rows for parallelism, merged in chunk
// order: deterministic), the sum of the shifts, then one CTA per row for the dot product and
// the row's epilogue (Rows::finish). The whole rewrite is a read of W (N*K elements) and of x
// (M*K): both kernels that read them are bandwidth-bound, so they load 16 bytes per thread
// where K is a multiple of the elements in 16 bytes (rows then start 16-byte aligned: ModelNew
// passes 16-byte aligned tensors) and keep several rows' loads in flight.
// (kColSumRows and colsum_chunks, the partials' layout, are stages.cuh's: the workspace's size.)
constexpr int kColSumThreads = 256;
constexpr int kColSumUnroll = 8; // rows of W whose loads one thread has in flight

// Elements of T in one 16-byte load: 4 floats, 8 bf16 / fp16 values.
template <class T>
constexpr int kVector16 = 16 / static_cast<int>(sizeof(T));

// v = the kVector16<T> elements of T at p (16-byte aligned), in fp32.
template <class T>
__device__ __forceinline__ void load16(const uint4* p, float (&v)[kVector16<T>]) {
  const uint4 raw = __ldg(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kVector16<T>; ++i) v[i] = as_float(e[i]);
}

// Columns of W one thread sums: one 16-byte load per row where K is a multiple of it (rows then
// start 16-byte aligned), else 1.
template <class T>
inline int colsum_vector(int K) { return K % kVector16<T> == 0 ? kVector16<T> : 1; }
template <class T>
inline int colsum_blocks(int K) {
  const int threads = (K + colsum_vector<T>(K) - 1) / colsum_vector<T>(K);
  return (threads + kColSumThreads - 1) / kColSumThreads;
}

// partial[chunk][k] = sum over the chunk's rows n, in row order, of scale[n] * W[n][k], for
// kVec consecutive columns k per thread. Each column's sum is the same sequence of fmas for
// either kVec, so the result does not depend on K's alignment. (Affine: the generated GemvAffine,
// whose affine() is static, or the backward's RowWeights, which reads its weights from memory.)
template <class Affine, class T, int kVec>
__global__ void __launch_bounds__(kColSumThreads)
    weighted_column_sum_kernel(const T* __restrict__ w, int N, int K, EpilogueParams p,
                               float* __restrict__ partial, Affine weights) {
  static_assert(kVec == 1 || kVec == kVector16<T>, "one element or one 16-byte load per row");
  const int k = (blockIdx.x * kColSumThreads + threadIdx.x) * kVec;
  if (k >= K) return;
  // A grid's y extent stops at 65535: beyond that many chunks, each CTA takes several.
  for (int chunk = blockIdx.y; chunk < colsum_chunks(N); chunk += gridDim.y) {
    const int n0 = chunk * kColSumRows;
    const int n1 = min(N, n0 + kColSumRows);
    float acc[kVec] = {};
#pragma unroll kColSumUnroll
    for (int n = n0; n < n1; ++n) {
      float scale, shift;
      weights.affine(n, p, scale, shift);
      const T* row = w + static_cast<size_t>(n) * K + k;
      if constexpr (kVec > 1) {
        float v[kVec];
        load16<T>(reinterpret_cast<const uint4*>(row), v);
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[i] = fmaf(scale, v[i], acc[i]);
      } else {
        acc[0] = fmaf(scale, as_float(__ldg(row)), acc[0]);
      }
    }
    float* out = partial + static_cast<size_t>(chunk) * K + k;
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = acc[i];
  }
}

template <class Affine, class T>
cudaError_t launch_weighted_column_sum(const T* w, int N, int K, const EpilogueParams& p,
                                       float* partial, cudaStream_t stream, Affine weights = Affine{}) {
  const dim3 grid(colsum_blocks<T>(K), std::min(colsum_chunks(N), 65535));
  if (colsum_vector<T>(K) > 1) {
    weighted_column_sum_kernel<Affine, T, kVector16<T>><<<grid, kColSumThreads, 0, stream>>>(w, N, K, p, partial, weights);
  } else {
    weighted_column_sum_kernel<Affine, T, 1><<<grid, kColSumThreads, 0, stream>>>(w, N, K, p, partial, weights);
  }
  return cudaGetLastError();
}

// w_sum[k] = the partials of column k in chunk order, one thread per column; the grid's last
// CTA sums the shifts into *total instead (one launch fewer than a kernel of its own: measured
// 6 us less per call on the H100). Splitting a column's chunks over 4 threads, or unrolling the
// shift loop, changed nothing measurable (this kernel stays ~8 us at KernelBench 18's shape).
inline int column_sum_merge_blocks(int K) { return (K + kRowThreads - 1) / kRowThreads + 1; }

template <class Affine>
__global__ void __launch_bounds__(kRowThreads)
    column_sum_merge_kernel(const float* __restrict__ partial, int chunks, int N, int K,
                            EpilogueParams p, float* __restrict__ w_sum, float* __restrict__ total,
                            Affine weights) {
  if (blockIdx.x == gridDim.x - 1) {
    __shared__ float scratch[32];
    float acc = 0.f;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
      float scale, shift;
      weights.affine(n, p, scale, shift);
      acc += shift;
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) *total = acc;
    return;
  }
  const int k = blockIdx.x * kRowThreads + threadIdx.x;
  if (k >= K) return;
  float acc = 0.f;
  for (int c = 0; c < chunks; ++c) acc += partial[static_cast<size_t>(c) * K + k];
  w_sum[k] = acc;
}

// The row sum as torch computes it where x's row holds an infinity (and no NaN): there each
// z[m][n] = x_m . W_n is +-inf or NaN on its own (inf * W[n][k] of both signs, or inf * 0), and
// the row sum of the scaled z is NaN as soon as one is NaN or the signs differ; x_m . w_sum
// (the rewrite) would be a plain +-inf. So: sum_n scale[n] * (the infinite elements' part of
// x_m . W_n), plus the finite elements' part of x_m . w_sum (NaN where W holds one), plus the
// shifts. Reads W only at the infinite elements (a list of up to kGemvInfList of them, else every
// element again): a slow path that rows of finite values never take.
constexpr int kGemvInfList = 64;

template <class Affine, class T>
__device__ float nonfinite_row_sum(const T* __restrict__ xm, const T* __restrict__ w,
                                   const float* __restrict__ w_sum, float shift_total, int N, int K,
                                   const EpilogueParams& p, float* scratch) {
  __shared__ int inf_k[kGemvInfList];
  __shared__ int inf_count;
  if (threadIdx.x == 0) inf_count = 0;
  __syncthreads();
  float finite = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const float v = as_float(xm[k]);
    if (isinf(v)) {
      const int slot = atomicAdd(&inf_count, 1);
      if (slot < kGemvInfList) inf_k[slot] = k;
    } else {
      finite = fmaf(v, w_sum[k], finite);
    }
  }
  __syncthreads();
  const int listed = inf_count;  // (> kGemvInfList: scan the row for them instead)
  float infinite = 0.f;
  for (int n = threadIdx.x; n < N; n += blockDim.x) {
    const T* wn = w + static_cast<size_t>(n) * K;
    float u = 0.f;
    if (listed <= kGemvInfList) {
      for (int i = 0; i < listed; ++i) u += as_float(xm[inf_k[i]]) * as_float(wn[inf_k[i]]);
    } else {
      for (int k = 0; k < K; ++k) {
        const float v = as_float(xm[k]);
        if (isinf(v)) u += v * as_float(wn[k]);
      }
    }
    float scale, shift;
    Affine::affine(n, p, scale, shift);
    infinite += scale * u;
  }
  return block_sum(finite, scratch) + block_sum(infinite, scratch) + shift_total;
}

// dst[m] = Rows::finish(x_m . w_sum + shift total): one CTA per row, a 16-byte load of x's row
// at a time where K is a multiple of it (x's rows and w_sum then start 16-byte aligned). The sum
// itself into kept_sums[m] where the backward will want it (nullptr: not kept).
template <class Affine, class Rows, class T>
__global__ void __launch_bounds__(kRowThreads)
    gemv_rows_kernel(const T* __restrict__ x, const T* __restrict__ w,
                     const float* __restrict__ w_sum, const float* __restrict__ shift_total, int N, int K,
                     float* __restrict__ dst, float* __restrict__ kept_sums, EpilogueParams p) {
  constexpr int kVec = kVector16<T>;
  __shared__ float scratch[32];
  const T* xm = x + static_cast<size_t>(blockIdx.x) * K;
  float acc = 0.f;
  if (K % kVec == 0) {
    const uint4* x16 = reinterpret_cast<const uint4*>(xm);
    const float4* w4 = reinterpret_cast<const float4*>(w_sum);
#pragma unroll 4
    for (int k = threadIdx.x; k < K / kVec; k += blockDim.x) {
      float a[kVec];
      load16<T>(x16 + k, a);
#pragma unroll
      for (int j = 0; j < kVec / 4; ++j) {
        const float4 b = w4[k * (kVec / 4) + j];
        acc = fmaf(a[4 * j], b.x, acc);
        acc = fmaf(a[4 * j + 1], b.y, acc);
        acc = fmaf(a[4 * j + 2], b.z, acc);
        acc = fmaf(a[4 * j + 3], b.w, acc);
      }
    }
  } else {
    for (int k = threadIdx.x; k < K; k += blockDim.x) acc = fmaf(as_float(__ldg(xm + k)), w_sum[k], acc);
  }
  acc = block_sum(acc, scratch);
  float sum = acc + *shift_total;
  // (acc is the same in every thread: the branch is uniform.)
  if (!isfinite(acc)) {
    bool inf = false, nan = false;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
      const float v = as_float(xm[k]);
      inf |= isinf(v);
      nan |= isnan(v);
    }
    if (__syncthreads_or(inf) && !__syncthreads_or(nan)) {
      sum = nonfinite_row_sum<Affine>(xm, w, w_sum, *shift_total, N, K, p, scratch);
    }
  }
  if (threadIdx.x == 0) {
    dst[blockIdx.x] = Rows::finish(sum, N, p);
    if (kept_sums != nullptr) kept_sums[blockIdx.x] = sum;
  }
}

// The whole rewrite, into `out` (M floats): workspace holds gemv_floats(N, K) floats (entry.cuh),
// the column-sum partials ([chunks][K]), then the column sums ([K]) and the shift total. For the
// backward (gemv_backward.cuh): the rows' sums into kept_sums [M] and the column sums into
// kept_w_sum [K] instead of the workspace (nullptr: not kept).
template <class Affine, class Rows, class T, class W>
cudaError_t launch_gemv(const T* x, const W* w, int M, int N, int K, const EpilogueParams& p,
                        float* workspace, float* out, float* kept_sums, float* kept_w_sum, cudaStream_t stream) {
  static_assert(std::is_same<T, W>::value, "x and w of one type (no build reads an fp32 weight beside 16-bit x where a rewrite runs: generator.autocast_gemm_type)");
  const int chunks = colsum_chunks(N);
  float* partial = workspace;
  float* w_sum = kept_w_sum != nullptr ? kept_w_sum : partial + static_cast<size_t>(chunks) * K;
  float* total = partial + static_cast<size_t>(chunks) * K + K;
  cudaError_t err = cudaSuccess;
  if (K > 0) err = launch_weighted_column_sum<Affine>(w, N, K, p, partial, stream);
  if (err != cudaSuccess) return err;
  column_sum_merge_kernel<Affine>
      <<<column_sum_merge_blocks(K), kRowThreads, 0, stream>>>(partial, chunks, N, K, p, w_sum, total, Affine{});
  gemv_rows_kernel<Affine, Rows, T><<<M, kRowThreads, 0, stream>>>(x, w, w_sum, total, N, K, out, kept_sums, p);
  return cudaGetLastError();
}

}  // namespace kgen
