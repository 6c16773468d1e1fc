// A row sum of the GEMM output as a matrix-vector product (kgen/ir/rewrite.py, row_sum_of_gemm):
// the kernels of a part that the rewrite left without a GEMM.
//
// Follows common.cuh and stages.cuh (concatenated before this file; not included here): it uses
// the row kernels' block_sum and kRowThreads.
#pragma once

namespace kgen {

// sum_n (scale[n] * (x_m . W_n) + shift[n]) = x_m . (sum_n scale[n] W_n) + sum_n shift[n]:
// column sums of the scaled W (read once, in chunks of rows for parallelism, merged in chunk
// order: deterministic), the sum of the shifts, then one CTA per row for the dot product and
// the row's epilogue (Rows::finish). The whole rewrite is a read of W (N*K floats) and of x
// (M*K): both kernels that read them are bandwidth-bound, so they load 16 bytes per thread
// where K % 4 == 0 (rows then start 16-byte aligned: ModelNew passes 16-byte aligned tensors)
// and keep several rows' loads in flight.
// (kColSumRows and colsum_chunks, the partials' layout, are stages.cuh's: the workspace's size.)
constexpr int kColSumThreads = 256;
constexpr int kColSumUnroll = 8; // rows of W whose loads one thread has in flight

// Columns of W one thread sums: 4 (one float4 per row) where K % 4 == 0.
inline int colsum_vector(int K) { return K % 4 == 0 ? 4 : 1; }
inline int colsum_blocks(int K) {
  const int threads = (K + colsum_vector(K) - 1) / colsum_vector(K);
  return (threads + kColSumThreads - 1) / kColSumThreads;
}

// partial[chunk][k] = sum over the chunk's rows n, in row order, of scale[n] * W[n][k], for
// kVec consecutive columns k per thread. Each column's sum is the same sequence of fmas for
// either kVec, so the result does not depend on K's alignment.
template <class Affine, int kVec>
__global__ void __launch_bounds__(kColSumThreads)
    weighted_column_sum_kernel(const float* __restrict__ w, int N, int K, EpilogueParams p,
                               float* __restrict__ partial) {
  static_assert(kVec == 1 || kVec == 4, "one float or one float4 per row");
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
      Affine::affine(n, p, scale, shift);
      const float* row = w + static_cast<size_t>(n) * K + k;
      if constexpr (kVec == 4) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(row));
        acc[0] = fmaf(scale, v.x, acc[0]);
        acc[1] = fmaf(scale, v.y, acc[1]);
        acc[2] = fmaf(scale, v.z, acc[2]);
        acc[3] = fmaf(scale, v.w, acc[3]);
      } else {
        acc[0] = fmaf(scale, __ldg(row), acc[0]);
      }
    }
    float* out = partial + static_cast<size_t>(chunk) * K + k;
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = acc[i];
  }
}

template <class Affine>
cudaError_t launch_weighted_column_sum(const float* w, int N, int K, const EpilogueParams& p,
                                       float* partial, cudaStream_t stream) {
  const dim3 grid(colsum_blocks(K), std::min(colsum_chunks(N), 65535));
  if (colsum_vector(K) == 4) {
    weighted_column_sum_kernel<Affine, 4><<<grid, kColSumThreads, 0, stream>>>(w, N, K, p, partial);
  } else {
    weighted_column_sum_kernel<Affine, 1><<<grid, kColSumThreads, 0, stream>>>(w, N, K, p, partial);
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
                            EpilogueParams p, float* __restrict__ w_sum, float* __restrict__ total) {
  if (blockIdx.x == gridDim.x - 1) {
    __shared__ float scratch[32];
    float acc = 0.f;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
      float scale, shift;
      Affine::affine(n, p, scale, shift);
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

template <class Affine>
__device__ float nonfinite_row_sum(const float* __restrict__ xm, const float* __restrict__ w,
                                   const float* __restrict__ w_sum, float shift_total, int N, int K,
                                   const EpilogueParams& p, float* scratch) {
  __shared__ int inf_k[kGemvInfList];
  __shared__ int inf_count;
  if (threadIdx.x == 0) inf_count = 0;
  __syncthreads();
  float finite = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const float v = xm[k];
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
    const float* wn = w + static_cast<size_t>(n) * K;
    float u = 0.f;
    if (listed <= kGemvInfList) {
      for (int i = 0; i < listed; ++i) u += xm[inf_k[i]] * wn[inf_k[i]];
    } else {
      for (int k = 0; k < K; ++k) {
        if (isinf(xm[k])) u += xm[k] * wn[k];
      }
    }
    float scale, shift;
    Affine::affine(n, p, scale, shift);
    infinite += scale * u;
  }
  return block_sum(finite, scratch) + block_sum(infinite, scratch) + shift_total;
}

// dst[m] = Rows::finish(x_m . w_sum + shift total): one CTA per row, 16-byte loads where
// K % 4 == 0 (x's rows and w_sum then start 16-byte aligned).
template <class Affine, class Rows>
__global__ void __launch_bounds__(kRowThreads)
    gemv_rows_kernel(const float* __restrict__ x, const float* __restrict__ w,
                     const float* __restrict__ w_sum, const float* __restrict__ shift_total, int N, int K,
                     float* __restrict__ dst, EpilogueParams p) {
  __shared__ float scratch[32];
  const float* xm = x + static_cast<size_t>(blockIdx.x) * K;
  float acc = 0.f;
  if (K % 4 == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(xm);
    const float4* w4 = reinterpret_cast<const float4*>(w_sum);
#pragma unroll 4
    for (int k = threadIdx.x; k < K / 4; k += blockDim.x) {
      const float4 a = __ldg(x4 + k), b = w4[k];
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
  } else {
    for (int k = threadIdx.x; k < K; k += blockDim.x) acc = fmaf(__ldg(xm + k), w_sum[k], acc);
  }
  acc = block_sum(acc, scratch);
  float sum = acc + *shift_total;
  // (acc is the same in every thread: the branch is uniform.)
  if (!isfinite(acc)) {
    bool inf = false, nan = false;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
      inf |= isinf(xm[k]);
      nan |= isnan(xm[k]);
    }
    if (__syncthreads_or(inf) && !__syncthreads_or(nan)) {
      sum = nonfinite_row_sum<Affine>(xm, w, w_sum, *shift_total, N, K, p, scratch);
    }
  }
  if (threadIdx.x == 0) dst[blockIdx.x] = Rows::finish(sum, N, p);
}

// The whole rewrite, into `out` (M floats): workspace holds gemv_floats(N, K) floats (entry.cuh),
// the column-sum partials ([chunks][K]), then the column sums ([K]) and the shift total.

template <class Affine, class Rows>
cudaError_t launch_gemv(const float* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                        float* workspace, float* out, cudaStream_t stream) {
  const int chunks = colsum_chunks(N);
  float* partial = workspace;
  float* w_sum = partial + static_cast<size_t>(chunks) * K;
  float* total = w_sum + K;
  cudaError_t err = cudaSuccess;
  if (K > 0) err = launch_weighted_column_sum<Affine>(w, N, K, p, partial, stream);
  if (err != cudaSuccess) return err;
  column_sum_merge_kernel<Affine>
      <<<column_sum_merge_blocks(K), kRowThreads, 0, stream>>>(partial, chunks, N, K, p, w_sum, total);
  gemv_rows_kernel<Affine, Rows><<<M, kRowThreads, 0, stream>>>(x, w, w_sum, total, N, K, out, p);
  return cudaGetLastError();
}

}  // namespace kgen
