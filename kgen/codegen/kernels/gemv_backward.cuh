// The backward of a part that the matrix-vector rewrite left without a GEMM (kgen/lower/backward.py,
// _gemv_structs; the forward is gemv.cuh's).
//
// Follows gemv.cuh and backward.cuh (concatenated before this file; not included here).
//
// The forward sums each row of y = s * z + t (z = x W^T; s, t per column: GemvAffine) without
// forming z. The gradient that reaches y is the same in every column of a row: dR[m], the row
// sum's gradient (Rows::grad, from the sum the forward kept and the gradient of the row's
// output). So dz[m][n] = dR[m] s[n] has rank one, and the backward forms no dz either:
//   dx[m][k] = dR[m] w_sum[k]        (w_sum = sum_n s[n] W_n: the forward's column sums, kept)
//   dW[n][k] = s[n] u[k]             (u = x^T dR: W-sized work is one write of dW)
//   a chain parameter's gradient: its contribution at an element is g (a[n] z + b[n]) (the chain
//   is affine in z), whose sum over the rows is a[n] (W_n . u) + b[n] sum_m dR[m], i.e.
//   sum_m dR[m] times the contribution at z = (W_n . u) / sum_m dR[m] (Column::apply there); W u
//   is computed only where some a is not 0 (kReadsZ).
// Every sum runs in a fixed order (no atomics): the same inputs give the same bits. x and w are
// read, and dx and dW written, in the module's dtype T (every sum in fp32, each gradient rounded
// once): a 16-bit module's backward makes no fp32 copy of W or of its gradient.
#pragma once

namespace kgen {

// The weights of x's rows for u = x^T dR (weighted_column_sum_kernel): scale dR[m], and shift
// dR[m] too, so that the merge's total is sum_m dR[m].
struct RowWeights {
  const float* d;
  __device__ __forceinline__ void affine(int m, const EpilogueParams&, float& scale, float& shift) const {
    scale = shift = d[m];
  }
};

// dR[m] = Rows::grad(sums[m], g[m]): one thread per row.
template <class Rows>
__global__ void gemv_row_grad_kernel(const float* __restrict__ sums, const float* __restrict__ g, int M, int N,
                                     EpilogueParams p, float* __restrict__ d_sum) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m < M) d_sum[m] = Rows::grad(sums[m], g[m], N, p);
}

// dst[0..3] = v0..v3 in T, one store (16 bytes of floats, 8 of bf16 / fp16; dst aligned so).
template <class T>
__device__ __forceinline__ void store4(T* dst, float v0, float v1, float v2, float v3) {
  if constexpr (std::is_same<T, float>::value) {
    *reinterpret_cast<float4*>(dst) = make_float4(v0, v1, v2, v3);
  } else {
    *reinterpret_cast<uint2*>(dst) = make_uint2(OutputType<T>::two(v0, v1), OutputType<T>::two(v2, v3));
  }
}

// out[i][k] = a[i] * b[k] (a [rows], b [cols]), in T; kAffineRows: a[i] is GemvAffine's scale of
// column i instead (dW's rows; a is then nullptr). A row per blockIdx.y (its factor read once),
// its columns over x, four a store where cols is a multiple of 4 (b and out then aligned: w_sum
// where the forward kept it, u in the workspace, ModelNew's dx and dW).
template <class Affine, bool kAffineRows, class T>
__global__ void __launch_bounds__(kBackwardThreads)
    outer_product_kernel(const float* __restrict__ a, const float* __restrict__ b, int rows, int cols,
                         EpilogueParams p, T* __restrict__ out) {
  const int vec = cols % 4 == 0 ? 4 : 1;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
  for (int i = blockIdx.y; i < rows; i += gridDim.y) {
    float ai;
    if constexpr (kAffineRows) {
      float shift;
      Affine::affine(i, p, ai, shift);
    } else {
      ai = a[i];
    }
    T* const row = out + static_cast<size_t>(i) * cols;
    if (vec == 4) {
      const float4* b4 = reinterpret_cast<const float4*>(b);
      for (int k = first; k < cols / 4; k += step) {
        const float4 v = b4[k];
        store4(row + 4 * k, ai * v.x, ai * v.y, ai * v.z, ai * v.w);
      }
    } else {
      for (int k = first; k < cols; k += step) row[k] = OutputType<T>::one(ai * b[k]);
    }
  }
}

template <class Affine, bool kAffineRows, class T>
cudaError_t launch_outer_product(const float* a, const float* b, int rows, int cols, const EpilogueParams& p, T* out,
                                 cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const int per_row = cols % 4 == 0 ? cols / 4 : cols;
  const dim3 grid(std::min((per_row + kBackwardThreads - 1) / kBackwardThreads, 64), std::min(rows, 65535));
  outer_product_kernel<Affine, kAffineRows, T><<<grid, kBackwardThreads, 0, stream>>>(a, b, rows, cols, p, out);
  return cudaGetLastError();
}

// wu[n] = W_n . u: one CTA per row of W (a parameter that scales the chain: kReadsZ).
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    row_dot_kernel(const T* __restrict__ w, const float* __restrict__ u, int K, float* __restrict__ wu) {
  __shared__ float scratch[32];
  const T* row = w + static_cast<size_t>(blockIdx.x) * K;
  float acc = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) acc = fmaf(as_float(row[k]), u[k], acc);
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) wu[blockIdx.x] = acc;
}

// grad_cols[k][n] = a_k[n] wu[n] + b_k[n] dr_total for each parameter k of the chain (one thread per
// column; wu nullptr: every a is 0). Where dr_total is not 0 that is dr_total * c_k(wu[n] / dr_total),
// c_k(z) = a_k z + b_k: the chain's contribution evaluated once at the rows' dR-weighted mean of z,
// as the forward evaluates it (a difference c_k(1) - c_k(0) would lose a's digits to a large b:
// `(z + b) * s`). Where dr_total is 0 (or the mean overflows): a_k wu[n], a_k from that difference.
template <class B>
__global__ void gemv_column_grads_kernel(const float* __restrict__ wu, const float* __restrict__ dr_total, int N,
                                         EpilogueParams p, float* __restrict__ grad_cols) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float total = *dr_total;
  const float mean_z = wu != nullptr ? wu[n] / total : 0.f;
  float c[B::kParams];
  if (total != 0.f && isfinite(mean_z)) {
    B::Column::apply(mean_z, 1.f, n, p, c);
#pragma unroll
    for (int k = 0; k < B::kParams; ++k) grad_cols[static_cast<size_t>(k) * N + n] = c[k] * total;
  } else {
    float at1[B::kParams];
    B::Column::apply(0.f, 1.f, n, p, c);
    B::Column::apply(1.f, 1.f, n, p, at1);
#pragma unroll
    for (int k = 0; k < B::kParams; ++k) {
      grad_cols[static_cast<size_t>(k) * N + n] = (wu != nullptr ? (at1[k] - c[k]) * wu[n] : 0.f) + c[k] * total;
    }
  }
}

// The workspace: dR [M], u's partials [chunks of M][K], u [K], sum_m dR[m], W u [N].
inline long long gemv_backward_floats(int M, int N, int K) {
  return backward_segment(M) + backward_segment((colsum_chunks(M) + 1) * static_cast<long long>(K) + 1) +
         backward_segment(N);
}

// g: the gradient of the row's output (M floats: the part's output, or a broadcast tail's core
// value); sums and w_sum: what the forward kept (gemv.cuh, launch_gemv).
template <class Affine, class B, class T>
BackwardStatus gemv_backward(const T* x, const T* w, const float* g, const float* sums, const float* w_sum,
                             int M, int N, int K, const EpilogueParams& p, float* workspace, T* dx, T* dw,
                             float* grad_cols, bool need_dx, bool need_dw, cudaStream_t stream) {
  if (M == 0 || N == 0) return {"", cudaSuccess};
  if (sums == nullptr) return {"the forward kept no row sums (it ran without autograd)", cudaErrorInvalidValue};
  float* d_sum = workspace;
  float* partial = d_sum + backward_segment(M);
  float* u = partial + static_cast<size_t>(colsum_chunks(M)) * K;
  float* total = u + K;
  float* wu = partial + backward_segment((colsum_chunks(M) + 1) * static_cast<long long>(K) + 1);
  gemv_row_grad_kernel<typename B::Rows><<<(M + kBackwardThreads - 1) / kBackwardThreads, kBackwardThreads, 0, stream>>>(
      sums, g, M, N, p, d_sum);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {"dL/d(row sum)", err};
  // u only where dW or W u reads it (else the merge's last CTA alone: sum_m dR[m]).
  const RowWeights weights{d_sum};
  const int u_columns = need_dw || B::kReadsZ ? K : 0;
  if (u_columns > 0) err = launch_weighted_column_sum<RowWeights, T>(x, M, K, p, partial, stream, weights);
  if (err != cudaSuccess) return {"u = x^T dR", err};
  column_sum_merge_kernel<RowWeights><<<column_sum_merge_blocks(u_columns), kRowThreads, 0, stream>>>(
      partial, colsum_chunks(M), M, u_columns, p, u, total, weights);
  if ((err = cudaGetLastError()) != cudaSuccess) return {"u = x^T dR", err};
  if (need_dx && (err = launch_outer_product<Affine, false>(d_sum, w_sum, M, K, p, dx, stream)) != cudaSuccess) {
    return {"dx = dR w_sum", err};
  }
  if (need_dw && (err = launch_outer_product<Affine, true>(nullptr, u, N, K, p, dw, stream)) != cudaSuccess) {
    return {"dW = s u^T", err};
  }
  if constexpr (B::kParams > 0) {
    if constexpr (B::kReadsZ) {
      row_dot_kernel<T><<<N, kRowThreads, 0, stream>>>(w, u, K, wu);
      if ((err = cudaGetLastError()) != cudaSuccess) return {"W u", err};
    }
    gemv_column_grads_kernel<B><<<(N + kBackwardThreads - 1) / kBackwardThreads, kBackwardThreads, 0, stream>>>(
        B::kReadsZ ? wu : nullptr, total, N, p, grad_cols);
    for (int k = 0; k < B::kParams; ++k) {
      if (B::kScalar[k]) backward_scalar_sum_kernel<<<1, kBackwardThreads, 0, stream>>>(grad_cols + static_cast<size_t>(k) * N, N);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return {"parameter gradients", err};
  }
  return {"", cudaSuccess};
}

}  // namespace kgen
