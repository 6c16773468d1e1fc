// The backward pass of one GEMM part whose epilogue is point-wise (kgen/lower/backward.py decides
// which parts; their generated struct Backward comes from kgen/ir/derivatives.py through the IR).
//
// In training, the forward pass of such a part keeps z = x w^T (forward_keeping_z: the GEMM's
// epilogue stores z beside the output, KeepingZ; M x N floats more of memory traffic, which saves
// the backward a GEMM). Given x [M][K], w [N][K], g = dL/d(out) [M][N] and z:
//   1. z = x w^T again, with the part's own GEMM and an identity epilogue, only where the
//      forward kept no z (it was run without autograd wanting a backward);
//   2. dz = B::apply(z, g) element-wise into the workspace, and each CTA's per-column partial sums
//      of the epilogue parameters' gradient contributions, merged in a fixed order (no atomics:
//      the same inputs give the same bits);
//   3. dx = dz w   as the GEMM dz (w^T)^T: w^T [K][N] transposed into the workspace;
//   4. dw = dz^T x as the GEMM dz^T (x^T)^T: dz^T [N][M] and x^T [K][M] in the workspace.
// The GEMMs take K-major operands (tf32 wgmma reads no other layout), hence the transposes.
#pragma once

namespace kgen {

// (kBackwardNone / kBackwardPointwise / kBackwardStaged, StoreEpilogue and KeepingZ are
// common.cuh's: every part names its kind, the backward's GEMMs store with StoreEpilogue, and the
// forward of a point-wise part keeps z with KeepingZ.)

constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;

// out [cols][rows] = in [rows][cols]^T, through a padded shared-memory tile (coalesced both ways).
__global__ void transpose_kernel(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int c0 = blockIdx.x * kTransposeTile, r0 = blockIdx.y * kTransposeTile;
  for (int i = threadIdx.y; i < kTransposeTile; i += kTransposeRows) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[static_cast<size_t>(r) * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTransposeTile; i += kTransposeRows) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[static_cast<size_t>(c) * rows + r] = tile[threadIdx.x][i];
  }
}

inline cudaError_t transpose(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile, (rows + kTransposeTile - 1) / kTransposeTile);
  transpose_kernel<<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(in, out, rows, cols);
  return cudaGetLastError();
}

// Compensated (Kahan) summation: the column sums of the backward add up to M values (16384
// and more), where plain fp32 accumulation loses ~sqrt(M) ulps of the running sum (a BatchNorm
// bias gradient at M = 16384 came out 4x further from fp64 than eager's). nvcc keeps the
// compensation: it does not reassociate floating-point adds without --use_fast_math.
struct KahanSum {
  float sum = 0.f, carry = 0.f;
  __device__ __forceinline__ void add(float v) {
    const float y = v - carry;
    const float t = sum + y;
    carry = (t - sum) - y;
    sum = t;
  }
};

constexpr int kBackwardThreads = 256;   // one column per thread
constexpr int kBackwardRows = 64;       // rows per CTA: the partial sums' granularity

inline int backward_row_blocks(int M) { return (M + kBackwardRows - 1) / kBackwardRows; }

// dz from z and g (dz may be g; nullptr: only the sums); partial[(row block * P + k) * N + n] = the row
// block's sum of parameter k's gradient contributions in column n. G, D: g's and dz's element
// types (a 16-bit build's kernels read g and write dz in the module's dtype: entry_backward.cuh,
// backward_with_io).
template <class B, int kParams = B::kParams, class G = float, class D = float>
__global__ void backward_pointwise_kernel(const float* z, D* dz, const G* g, int M, int N,
                                          EpilogueParams p, float* __restrict__ partial) {
  const int n = blockIdx.x * kBackwardThreads + threadIdx.x;
  if (n >= N) return;
  const int m_end = min(M, (blockIdx.y + 1) * kBackwardRows);
  KahanSum sums[kParams > 0 ? kParams : 1];
  for (int m = blockIdx.y * kBackwardRows; m < m_end; ++m) {
    const size_t i = static_cast<size_t>(m) * N + n;
    float contribution[kParams > 0 ? kParams : 1];
    const float d = B::apply(z[i], as_float(g[i]), m, n, p, contribution);
    if (dz != nullptr) store_as(dz + i, d);
#pragma unroll
    for (int k = 0; k < kParams; ++k) sums[k].add(contribution[k]);
  }
#pragma unroll
  for (int k = 0; k < kParams; ++k)
    partial[(static_cast<size_t>(blockIdx.y) * kParams + k) * N + n] = sums[k].sum;
}

// grad[k * N + n] (+)= sum over row blocks, in order, of partial[(block * P + k) * N + n].
__global__ void backward_merge_kernel(const float* __restrict__ partial, int blocks, int params, int N,
                                      float* __restrict__ grad, bool accumulate) {
  const int n = blockIdx.x * kBackwardThreads + threadIdx.x;
  const int k = blockIdx.y;
  if (n >= N) return;
  KahanSum s;
  for (int b = 0; b < blocks; ++b) s.add(partial[(static_cast<size_t>(b) * params + k) * N + n]);
  float& out = grad[static_cast<size_t>(k) * N + n];
  out = accumulate ? out + s.sum : s.sum;
}

// A one-element parameter's gradient: the sum of its row of column sums, into its element 0
// (one CTA, a fixed order: deterministic).
__global__ void backward_scalar_sum_kernel(float* __restrict__ row, int N) {
  __shared__ float part[kBackwardThreads];
  KahanSum s;
  for (int n = threadIdx.x; n < N; n += kBackwardThreads) s.add(row[n]);
  part[threadIdx.x] = s.sum;
  __syncthreads();
  for (int half = kBackwardThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) row[0] = part[0];
}

// Workspace segments start on 128-byte boundaries (TMA and 16-byte loads need 16).
inline long long backward_segment(long long floats) { return (floats + 31) / 32 * 32; }

// The backward's own GEMMs' segments of its workspace (w^T, dz^T, x^T), its last: a build whose
// backward runs no GEMM of its own (a 16-bit module's: torch's run them, model_new.py.j2) asks
// for none of them (backward_gemm_floats, NoBackwardGemm).
inline long long backward_gemm_floats(int M, int N, int K) {
  const long long m = M, n = N, k = K;
  return backward_segment(k * n) + backward_segment(n * m) + backward_segment(k * m);
}

// Workspace floats of backward_part: with `gemms` (its own GEMMs run) z / dz, the partial sums,
// then the GEMMs'; without, the partial sums alone (dz goes to the caller's dz_out).
inline long long backward_floats(int M, int N, int K, int params, bool gemms) {
  const long long m = M, n = N;
  return (gemms ? backward_segment(m * n) : 0) +
         backward_segment(static_cast<long long>(backward_row_blocks(M)) * params * n) +
         (gemms ? backward_gemm_floats(M, N, K) : 0);
}

// Where dz [M][N] (fp32) lies in the backward's workspace, where the build's own GEMMs read it (the
// fp32 build's) or BatchNorm's prefix reads a row kernel's: its first segment. (A 16-bit build's
// kernels write dz into the caller's dz_out, in the module's dtype, and ModelNew computes
// dx = dz w and dw = dz^T x from it with torch's GEMMs: model_new.py.j2.)
constexpr long long kBackwardDzOffset = 0;

// What failed, for the error message: the step and the CUDA error.
struct BackwardStatus {
  const char* step;
  cudaError_t error;
};

// out[i] = in[i] converted (as_float, then rounded to nearest even as torch's .to(dtype) rounds:
// OutputType), for i < n: a 16-bit build's backward entry converts g to fp32 for a broadcast
// tail's or the matrix-vector rewrite's kernels, and the column sums to the module's dtype
// (backward_with_io). Eight elements a thread, a warp's 32 consecutive ones at a time.
template <class From, class To>
__global__ void convert_kernel(const From* __restrict__ in, To* __restrict__ out, long long n) {
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x * 8 + threadIdx.x;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const long long i = first + static_cast<long long>(j) * blockDim.x;
    if (i < n) out[i] = OutputType<To>::one(as_float(in[i]));
  }
}

template <class From, class To>
cudaError_t convert(const From* in, To* out, long long n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const long long blocks = (n + 8LL * kThreads - 1) / (8LL * kThreads);
  convert_kernel<From, To><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

// The matrix-vector rewrite's backward (gemv_backward.cuh, which a translation unit inlines only
// where a part has one): declared here for entry_backward.cuh, whose other kinds of backward
// discard the branches that name it.
inline long long gemv_backward_floats(int M, int N, int K);
template <class Affine, class B, class T>
BackwardStatus gemv_backward(const T* x, const T* w, const float* g, const float* sums, const float* w_sum,
                             int M, int N, int K, const EpilogueParams& p, float* workspace, T* dx, T* dw,
                             float* grad_cols, bool need_dx, bool need_dw, cudaStream_t stream);

// The backward's GEMM in a build whose backward runs none of its own (a 16-bit module's), so that
// it instantiates no fp32 GEMM kernel the forward does not use (build time): every launch refuses.
struct NoBackwardGemm : ExternalGemm {
  template <class EPI>
  static cudaError_t launch(const float*, const float*, int, int, int, const EpilogueParams&, cudaStream_t) {
    return cudaErrorNotSupported;
  }
};

// dx = dz w and dw = dz^T x on the part's own GEMM (K-major operands: w^T, dz^T and x^T into the
// workspace's GEMM segments, from `gemm_workspace` on: backward_gemm_floats).
template <class Gemm>
BackwardStatus backward_gemms(const float* x, const float* w, const float* dz, int M, int N, int K,
                              float* gemm_workspace, float* dx, float* dw, bool need_dx, bool need_dw,
                              cudaStream_t stream) {
  if ((!need_dx && !need_dw) || K == 0) return {"", cudaSuccess};
  if constexpr (std::is_same<Gemm, NoBackwardGemm>::value) {
    return {"dx and dW (this build's backward runs no GEMM: torch's compute them)", cudaErrorNotSupported};
  }
  float* w_t = gemm_workspace;
  float* dz_t = w_t + backward_segment(static_cast<long long>(K) * N);
  float* x_t = dz_t + backward_segment(static_cast<long long>(N) * M);
  EpilogueParams store{};
  cudaError_t err = cudaSuccess;
  if (need_dx) {
    if ((err = transpose(w, w_t, N, K, stream)) != cudaSuccess) return {"w^T", err};
    store.z = dx;
    if ((err = Gemm::template launch<StoreEpilogue>(dz, w_t, M, K, N, store, stream)) != cudaSuccess) return {"dx = dz w", err};
  }
  if (!need_dw) return {"", cudaSuccess};
  if ((err = transpose(dz, dz_t, M, N, stream)) != cudaSuccess) return {"dz^T", err};
  if ((err = transpose(x, x_t, M, K, stream)) != cudaSuccess) return {"x^T", err};
  store.z = dw;
  return {"dw = dz^T x", Gemm::template launch<StoreEpilogue>(dz_t, x_t, N, K, M, store, stream)};
}

// dx [M][K], dw [N][K] and grad_cols [P][N] (column sums of each parameter's contributions: a
// per-feature parameter's gradient, or, summed over n, a one-element parameter's).
// need_dx, need_dw: whether autograd wants dx and dw (a first layer's input needs no gradient:
// then no dx GEMM, and no w^T). A build whose backward runs no GEMM of its own (NoBackwardGemm: a
// 16-bit module's) writes dz into dz_out instead, in its type D (nullptr: only the sums), from the
// z its forward kept (it cannot recompute one).
template <class Gemm, class B, class G, class D>
BackwardStatus backward_part(const float* x, const float* w, const G* g, const float* kept_z, int M, int N,
                             int K, EpilogueParams p, float* workspace, float* dx, float* dw, float* grad_cols,
                             D* dz_out, bool need_dx, bool need_dw, cudaStream_t stream) {
  constexpr bool kOwnGemms = !std::is_same<Gemm, NoBackwardGemm>::value;
  if (M == 0 || N == 0) return {"", cudaSuccess};
  float* z = workspace + kBackwardDzOffset;   // z, then dz in its place (kOwnGemms)
  float* partial = kOwnGemms ? z + backward_segment(static_cast<long long>(M) * N) : workspace;
  float* gemm_workspace = partial + backward_segment(static_cast<long long>(backward_row_blocks(M)) * B::kParams * N);
  cudaError_t err = cudaSuccess;
  const int blocks = backward_row_blocks(M);
  const dim3 grid((N + kBackwardThreads - 1) / kBackwardThreads, blocks);
  if constexpr (kOwnGemms) {
    (void)dz_out;
    EpilogueParams store = p;
    store.z = z;
    if (kept_z == nullptr) {
      err = Gemm::template launch<StoreEpilogue>(x, w, M, N, K, store, stream);
      if (err != cudaSuccess) return {"z = x w^T", err};
    }
    backward_pointwise_kernel<B><<<grid, kBackwardThreads, 0, stream>>>(kept_z != nullptr ? kept_z : z, z, g, M, N, p,
                                                                        partial);
  } else {
    if (kept_z == nullptr) return {"the forward kept no z (it ran without autograd)", cudaErrorInvalidValue};
    backward_pointwise_kernel<B><<<grid, kBackwardThreads, 0, stream>>>(kept_z, dz_out, g, M, N, p, partial);
  }
  if ((err = cudaGetLastError()) != cudaSuccess) return {"dz", err};
  if (B::kParams > 0) {
    backward_merge_kernel<<<dim3((N + kBackwardThreads - 1) / kBackwardThreads, B::kParams), kBackwardThreads, 0, stream>>>(
        partial, blocks, B::kParams, N, grad_cols, false);
    for (int k = 0; k < B::kParams; ++k) {
      if (B::kScalar[k]) backward_scalar_sum_kernel<<<1, kBackwardThreads, 0, stream>>>(grad_cols + static_cast<size_t>(k) * N, N);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return {"parameter gradients", err};
  }
  if constexpr (kOwnGemms) {
    return backward_gemms<Gemm>(x, w, z, M, N, K, gemm_workspace, dx, dw, need_dx, need_dw, stream);
  } else {
    (void)gemm_workspace;
    return backward_gemms<Gemm>(x, w, nullptr, M, N, K, nullptr, dx, dw, need_dx, need_dw, stream);
  }
}

// ---- the staged backward (kgen/lower/backward.py, KIND_STAGED) -------------------------------------
// Given the forward's kept z (and, with BatchNorm, its per-column a, c, x̂ coefficients and γ/σ
// after z in the same buffer) and g = dL/d(out):
//   1. B::Rows, one CTA per row (unless the output is BatchNorm's own): the gradient of the
//      boundary value (BatchNorm's output, or z) into the workspace's dz, and the per-element
//      contributions of the parameters read after it into planes of M x N;
//   2. BatchNorm: the batch sums Σ ȳ, Σ ȳ x̂ (dβ, dγ into bn_grads), then B::Prefix: dz from
//      them and the ops before BatchNorm, with its parameters' column sums;
//   3. the planes' column sums (row blocks merged in order: deterministic), a one-element
//      parameter's total, and the GEMMs of backward_gemms.
//
// The row kernel has one CTA per row up to kBackwardRowCtas rows; beyond that each CTA takes
// backward_rows_per_cta(M) consecutive rows in turn and adds their parameter contributions into
// one row of the planes, so that the planes hold backward_plane_rows(M) rows, not M (GroupNorm's
// three at 16384 x 4096: 48 MB instead of 768 MB), while kBackwardRowCtas CTAs still fill the
// GPU. Each plane element has one thread adding to it, row after row: deterministic.
constexpr int kBackwardRowCtas = 1024;
inline int backward_rows_per_cta(int M) { return std::max(1, (M + kBackwardRowCtas - 1) / kBackwardRowCtas); }
inline int backward_plane_rows(int M) {
  const int r = backward_rows_per_cta(M);
  return (M + r - 1) / r;
}

// Rows::row adds into the planes (zero on entry); a pooling's scratch (2 N floats) is the CTA's.
// G, D: g's and dst's element types (backward_staged).
template <class Rows, class G, class D>
__global__ void __launch_bounds__(kRowThreads)
    backward_rows_kernel(const float* z, const G* g, int g_stride, D* dst, float* contrib, size_t plane,
                         int M, int N, int rows_per_cta, EpilogueParams p, bool cached, float* pool) {
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[32];
  const size_t m0 = static_cast<size_t>(blockIdx.x) * rows_per_cta;
  const size_t m1 = m0 + rows_per_cta < static_cast<size_t>(M) ? m0 + rows_per_cta : static_cast<size_t>(M);
  float* block_contrib = contrib + static_cast<size_t>(blockIdx.x) * N;
  float* block_pool = pool != nullptr ? pool + static_cast<size_t>(blockIdx.x) * 2 * N : nullptr;
  for (size_t m = m0; m < m1; ++m) {
    if (m > m0) __syncthreads();  // every thread is done with the previous row's cache and scratch
    Rows::row(z + m * N, g + m * g_stride, dst + m * N, block_contrib, plane, static_cast<int>(m), N, p,
              cached ? row_cache : nullptr, scratch, block_pool);
  }
}

// partial[(row block * slots + k) * N + n] = the row block's sum of plane k's column n.
__global__ void plane_column_sums_kernel(const float* __restrict__ contrib, size_t plane, int M, int N, int slots,
                                         float* __restrict__ partial) {
  const int n = blockIdx.x * kBackwardThreads + threadIdx.x;
  const int k = blockIdx.z;
  if (n >= N) return;
  const int m_end = min(M, (blockIdx.y + 1) * kBackwardRows);
  const float* column = contrib + k * plane + n;
  KahanSum s;
  for (int m = blockIdx.y * kBackwardRows; m < m_end; ++m) s.add(column[static_cast<size_t>(m) * N]);
  partial[(static_cast<size_t>(blockIdx.y) * slots + k) * N + n] = s.sum;
}

// Workspace floats of backward_staged: dz (where its own GEMMs read it, `gemms`, or BatchNorm's
// prefix reads a row kernel's, `rows_then_bn`), the contribution planes, the partials, with a
// pooling its row kernel CTAs' scratch (2 N floats each), then (with `gemms`) the GEMMs'.
inline long long backward_staged_floats(int M, int N, int K, int params, int slots, bool pool, bool rows_then_bn,
                                        bool gemms) {
  const long long m = M, n = N, plane_rows = backward_plane_rows(M);
  return (gemms || rows_then_bn ? backward_segment(m * n) : 0) + slots * backward_segment(plane_rows * n) +
         backward_segment(static_cast<long long>(backward_row_blocks(M)) * std::max(params, 2) * n) +
         (pool ? backward_segment(2 * plane_rows * n) : 0) + (gemms ? backward_gemm_floats(M, N, K) : 0);
}

// grad_cols [P][N] and bn_grads [2][N] (dβ, dγ) must be zero on entry (the steps add into them).
// As backward_part's, a build with no GEMM of its own (NoBackwardGemm) has dz written into dz_out
// (type D) by its last writer, BatchNorm's prefix or else the row kernel (a row kernel before
// BatchNorm writes an fp32 dz into the workspace, which the prefix reads); g is of type G (the
// row kernel or BatchNorm's kernels read it).
template <class Gemm, class B, class G, class D>
BackwardStatus backward_staged(const float* x, const float* w, const G* g, int g_stride, const float* saved,
                               int M, int N, int K, EpilogueParams p, float* workspace, float* dx, float* dw,
                               float* grad_cols, float* bn_grads, D* dz_out, bool bn_training, bool need_dx,
                               bool need_dw, cudaStream_t stream) {
  using Rows = typename B::Rows;
  constexpr bool kOwnGemms = !std::is_same<Gemm, NoBackwardGemm>::value;
  constexpr bool kDzInWorkspace = kOwnGemms || (Rows::kRuns && B::kHasBatchNorm);
  if (M == 0 || N == 0) return {"", cudaSuccess};
  if (!kOwnGemms && dz_out == nullptr) return {"dz_out (torch's GEMMs read it)", cudaErrorInvalidValue};
  // A staged part's backward reads what its forward kept (z, BatchNorm's per-column values):
  // there is no recomputing them here (the running statistics were updated once already).
  if (saved == nullptr) return {"the forward kept no z (it ran without autograd)", cudaErrorInvalidValue};
  const long long mn = static_cast<long long>(M) * N;
  const size_t mn_segment = static_cast<size_t>(backward_segment(mn));
  const int plane_rows = backward_plane_rows(M);
  const size_t plane = static_cast<size_t>(backward_segment(static_cast<long long>(plane_rows) * N));
  float* dz = workspace + kBackwardDzOffset;   // (kDzInWorkspace)
  float* contrib = workspace + (kDzInWorkspace ? mn_segment : 0);
  float* partial = contrib + Rows::kSlots * plane;
  float* after_partial = partial + backward_segment(static_cast<long long>(backward_row_blocks(M)) * std::max(B::kParams, 2) * N);
  float* pool = Rows::kPool ? after_partial : nullptr;
  float* gemm_workspace = after_partial + (Rows::kPool ? backward_segment(2LL * plane_rows * N) : 0);
  const float* z = saved;
  if constexpr (B::kHasBatchNorm) {
    // z, then a, c, x̂'s two coefficients and γ/σ per column (entry.cuh asserts the count).
    p.col_a = saved + mn;
    p.col_c = p.col_a + N;
    p.bn_xa = p.col_a + 2 * N;
    p.bn_xc = p.col_a + 3 * N;
    p.bn_gi = p.col_a + 4 * N;
  }
  const int blocks = backward_row_blocks(M);
  const int col_blocks = (N + kBackwardThreads - 1) / kBackwardThreads;
  cudaError_t err = cudaSuccess;
  // Where the row kernel writes the boundary value's gradient: the workspace's dz, else dz_out.
  auto* rows_dz = [&] {
    if constexpr (kDzInWorkspace) return dz;
    else return dz_out;
  }();
  (void)rows_dz;
  if constexpr (Rows::kRuns) {
    const size_t row_bytes = static_cast<size_t>(N) * sizeof(float);
    const bool cached = row_bytes <= kRowCacheBytes;
    using RowsDz = std::remove_pointer_t<decltype(rows_dz)>;
    if (cached && row_bytes > 48 * 1024) {
      err = cudaFuncSetAttribute(backward_rows_kernel<Rows, G, RowsDz>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(row_bytes));
      if (err != cudaSuccess) return {"row kernel shared memory", err};
    }
    if (Rows::kSlots > 0 &&
        (err = cudaMemsetAsync(contrib, 0, Rows::kSlots * plane * sizeof(float), stream)) != cudaSuccess) {
      return {"clearing the contribution planes", err};
    }
    backward_rows_kernel<Rows, G, RowsDz><<<plane_rows, kRowThreads, cached ? row_bytes : 0, stream>>>(
        z, g, g_stride, rows_dz, contrib, plane, M, N, backward_rows_per_cta(M), p, cached, pool);
    if ((err = cudaGetLastError()) != cudaSuccess) return {"the row stages' gradient", err};
  }
  // The boundary value's gradient BatchNorm's kernels read: the row kernel's dz, else g.
  const auto* y = [&] {
    if constexpr (Rows::kRuns) return static_cast<const float*>(dz);
    else return g;
  }();
  (void)y;
  // Where BatchNorm's prefix writes dz: the workspace for the build's own GEMMs, else dz_out.
  auto* prefix_dz = [&] {
    if constexpr (kOwnGemms) return dz;
    else return dz_out;
  }();
  (void)prefix_dz; (void)dz_out;
  if constexpr (B::kHasBatchNorm) {
    backward_pointwise_kernel<typename B::BnSums, 2>
        <<<dim3(col_blocks, blocks), kBackwardThreads, 0, stream>>>(z, static_cast<float*>(nullptr), y, M, N, p, partial);
    backward_merge_kernel<<<dim3(col_blocks, 2), kBackwardThreads, 0, stream>>>(partial, blocks, 2, N, bn_grads, false);
    p.bn_sum_y = bn_grads;
    p.bn_sum_yx = bn_grads + N;
    p.bn_training = bn_training ? 1 : 0;
    p.inv_batch = 1.0f / static_cast<float>(M);
    backward_pointwise_kernel<typename B::Prefix, B::kParams>
        <<<dim3(col_blocks, blocks), kBackwardThreads, 0, stream>>>(z, prefix_dz, y, M, N, p, partial);
    if (B::kParams > 0) {
      backward_merge_kernel<<<dim3(col_blocks, B::kParams), kBackwardThreads, 0, stream>>>(partial, blocks, B::kParams,
                                                                                          N, grad_cols, true);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return {"BatchNorm's gradient", err};
  }
  if constexpr (Rows::kSlots > 0) {
    const int plane_blocks = backward_row_blocks(plane_rows);
    plane_column_sums_kernel<<<dim3(col_blocks, plane_blocks, Rows::kSlots), kBackwardThreads, 0, stream>>>(
        contrib, plane, plane_rows, N, Rows::kSlots, partial);
    for (int k = 0; k < Rows::kSlots; ++k) {
      backward_merge_kernel<<<dim3(col_blocks, 1), kBackwardThreads, 0, stream>>>(
          partial + static_cast<size_t>(k) * N, plane_blocks, Rows::kSlots, N,
          grad_cols + static_cast<size_t>(Rows::kSlotOperand[k]) * N, true);
    }
  }
  for (int k = 0; k < B::kParams; ++k) {
    if (B::kScalar[k]) backward_scalar_sum_kernel<<<1, kBackwardThreads, 0, stream>>>(grad_cols + static_cast<size_t>(k) * N, N);
  }
  if ((err = cudaGetLastError()) != cudaSuccess) return {"parameter gradients", err};
  return backward_gemms<Gemm>(x, w, dz, M, N, K, kOwnGemms ? gemm_workspace : nullptr, dx, dw, need_dx, need_dw, stream);
}

// ---- a broadcast tail's backward (kgen/lower/backward.py, tail_backward_struct) ---------------------
// The gradient of one leaf of the tail (TB::grad<kLeaf>): dst[e] (+)= sum over r < reduced of
// TB::grad<kLeaf>(e, r), for each of its `count` elements e. With reduced == 1 a thread per element;
// else a CTA per element, its threads striding r (compensated sums, then the block's fixed-order
// reduction: deterministic, no atomics).
template <class TB, int kLeaf>
__global__ void __launch_bounds__(kRowThreads)
    tail_grad_kernel(const float* __restrict__ t, const float* __restrict__ g, float* __restrict__ dst, long long count,
                     long long reduced, int M, EpilogueParams p, bool accumulate) {
  if (reduced == 1) {
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count; e += step) {
      const float v = TB::template grad<kLeaf>(e, 0, t, g, M, p);
      dst[e] = accumulate ? dst[e] + v : v;
    }
    return;
  }
  __shared__ float scratch[32];
  for (long long e = blockIdx.x; e < count; e += gridDim.x) {
    KahanSum s;
    for (long long r = threadIdx.x; r < reduced; r += blockDim.x) s.add(TB::template grad<kLeaf>(e, r, t, g, M, p));
    const float total = block_sum(s.sum, scratch);
    if (threadIdx.x == 0) dst[e] = accumulate ? dst[e] + total : total;
  }
}

template <class TB, int kLeaf>
cudaError_t tail_grad(const float* t, const float* g, float* dst, int M, const EpilogueParams& p, bool accumulate,
                      cudaStream_t stream) {
  const long long count = TB::count(kLeaf, M), reduced = TB::reduced(kLeaf, M);
  if (count == 0) return cudaSuccess;
  if (reduced == 0) return accumulate ? cudaSuccess : cudaMemsetAsync(dst, 0, count * sizeof(float), stream);
  const long long blocks = reduced == 1 ? (count + kRowThreads - 1) / kRowThreads : count;
  tail_grad_kernel<TB, kLeaf><<<static_cast<int>(std::min<long long>(blocks, 65535LL * 8)), kRowThreads, 0, stream>>>(
      t, g, dst, count, reduced, M, p, accumulate);
  return cudaGetLastError();
}

// The gradients of the tail's operands (leaves kLeaf.. of TB), each added to what is there: a
// parameter's into its row of grad_cols [P][N] (after the stages' backward wrote theirs), an
// input's into its slot of p.d_input (zeroed by the caller, and maybe the stages' too; nullptr:
// autograd wants none).
template <class TB, int kLeaf = 1>
cudaError_t tail_operand_grads(const float* t, const float* g, float* grad_cols, int M, int N,
                               const EpilogueParams& p, cudaStream_t stream) {
  if constexpr (kLeaf >= TB::kLeaves) {
    return cudaSuccess;
  } else {
    float* dst = TB::kInput[kLeaf] ? p.d_input[TB::kInputSlot[kLeaf]]
                                   : grad_cols + static_cast<size_t>(TB::kOperand[kLeaf]) * N;
    if (dst != nullptr) {
      const cudaError_t err = tail_grad<TB, kLeaf>(t, g, dst, M, p, true, stream);
      if (err != cudaSuccess) return err;
    }
    return tail_operand_grads<TB, kLeaf + 1>(t, g, grad_cols, M, N, p, stream);
  }
}

// The forward of a point-wise part that keeps z for its backward: z = x w^T stored as it is and
// out = Epi(z) (out of Out: fp32, or the module's 16-bit dtype, rounded), both by the GEMM's
// epilogue (KeepingZ, common.cuh) as it stores the tile: one pass, where a point-wise pass reading z
// back cost a launch and z's read (12 in bf16: 190 -> 185 us of kernels a forward; docs/perf.md,
// session 49). The same
// bits: Epi runs on the same fp32 accumulator either way. A GEMM outside these kernels (cuBLAS)
// stores z, then the point-wise pass makes out.
// (X and W: the GEMM's operand types, x's and w's: one type, or in the build for torch.autocast
// of an fp32 module 16-bit x and fp32 w.)
template <class Gemm, class Epi, class X, class W, class Out>
cudaError_t forward_keeping_z(const X* x, const W* w, int M, int N, int K, EpilogueParams p,
                              float* z, Out* out, cudaStream_t stream) {
  if (M == 0 || N == 0) return cudaSuccess;
  if constexpr (std::is_base_of<ExternalGemm, Gemm>::value) {
    p.z = z;
    cudaError_t err = Gemm::template launch<StoreEpilogue>(x, w, M, N, K, p, stream);
    if (err != cudaSuccess) return err;
    pointwise_kernel<Epi, Out><<<pointwise_grid(z, out, M, N), kApplyThreads, 0, stream>>>(z, out, M, N, p);
    return cudaGetLastError();
  } else {
    p.z = reinterpret_cast<float*>(out);
    p.z_kept = z;
    using Stored = std::conditional_t<std::is_same<Out, float>::value, Epi, StoringAs<Epi, Out>>;
    return Gemm::template launch<KeepingZ<Stored>>(x, w, M, N, K, p, stream);
  }
}

}  // namespace kgen
