// BatchNorm kernels around the GEMM: column statistics (when not fused into the GEMM), the
// finalize step that merges per-tile partials and folds everything into per-column a, c, and
// the apply passes (out = a*z + c, or softmax(a*z + c) per row).
//
// Math (training mode, problem gemm_scale_bn): y = s*(z + b) has batch mean s*(mean_z + b) and
// variance s^2*var_z, so out = gamma*s*(z - mean_z)/sqrt(s^2*var_z + eps) + beta: the Linear bias
// cancels from the output and only reaches running_mean. gemm_bn_scale_softmax is
// softmax(t*(gamma*(z - mean_z)/sqrt(var_z + eps) + beta)); t folds into a and c.
#pragma once

namespace kgen {

enum class Problem { kGemmScaleBn, kGemmBnScaleSoftmax };

// Rows of z summarized by one statistics partial when the GEMM does not produce them.
constexpr int kStatsTileRows = 128;
constexpr int kStatsTileCols = 64;
constexpr int kStatsThreads = 256;

// Per-(row tile, column) mean and M2 of z, the same partial layout the fused epilogue writes.
__global__ void __launch_bounds__(kStatsThreads)
    column_stats_kernel(const float* __restrict__ z, int M, int N, float* part_mean,
                        float* part_m2) {
  constexpr int ldt = kStatsTileCols + 4;
  __shared__ __align__(16) float tile[kStatsTileRows * ldt];
  const int m0 = blockIdx.y * kStatsTileRows;
  const int n0 = blockIdx.x * kStatsTileCols;
  const int rows = min(kStatsTileRows, M - m0);
  for (int i = threadIdx.x; i < kStatsTileRows * kStatsTileCols; i += kStatsThreads) {
    const int r = i / kStatsTileCols;
    const int c = i % kStatsTileCols;
    tile[r * ldt + c] =
        (r < rows && n0 + c < N) ? z[static_cast<size_t>(m0 + r) * N + n0 + c] : 0.f;
  }
  __syncthreads();
  tile_column_stats<kStatsTileRows, kStatsTileCols, kStatsThreads>(tile, ldt, rows, n0, N,
                                                                   blockIdx.y, part_mean,
                                                                   part_m2);
}

struct FinalizeArgs {
  const float* part_mean;  // [tiles][N]
  const float* part_m2;    // [tiles][N]
  int rows_per_tile;       // every tile but the last holds this many rows
  int M, N;
  const float* bias;       // [N]
  const float* scale;      // [1] or [N]
  int scale_stride;        // 0 (broadcast) or 1
  const float* gamma;      // [N]
  const float* beta;       // [N]
  float* running_mean;     // [N]
  float* running_var;      // [N]
  const long long* num_batches_tracked;  // already incremented for this call
  float momentum;
  bool cumulative;         // momentum=None: factor 1/num_batches_tracked
  bool training;
  float eps;
  float* col_a;            // [N] out
  float* col_c;            // [N] out
};

// One thread per column. Training: Chan-merge the tile partials in tile order (deterministic,
// no atomics), update the running buffers as BatchNorm1d does (unbiased variance), and fold
// the batch statistics into a, c. Eval: fold the running statistics into a, c.
template <Problem P>
__global__ void bn_finalize_kernel(FinalizeArgs f) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= f.N) return;
  const float s = f.scale[n * f.scale_stride];
  const float g = f.gamma[n];
  const float be = f.beta[n];
  const float b = f.bias[n];
  float a, c;
  if (f.training) {
    const int tiles = (f.M + f.rows_per_tile - 1) / f.rows_per_tile;
    float count = 0.f, mean = 0.f, m2 = 0.f;
    for (int t = 0; t < tiles; ++t) {
      const float nb = static_cast<float>(min(f.rows_per_tile, f.M - t * f.rows_per_tile));
      const float mb = f.part_mean[static_cast<size_t>(t) * f.N + n];
      const float total = count + nb;
      const float delta = mb - mean;
      mean += delta * (nb / total);
      m2 += f.part_m2[static_cast<size_t>(t) * f.N + n] + delta * delta * (count * nb / total);
      count = total;
    }
    const float var_z = m2 / count;  // biased, as BatchNorm normalizes with
    float batch_mean, batch_var;     // of the tensor BatchNorm sees
    if (P == Problem::kGemmScaleBn) {
      batch_mean = s * (mean + b);
      batch_var = s * s * var_z;
      a = g * s * rsqrtf(batch_var + f.eps);
      c = be - a * mean;
    } else {
      batch_mean = mean + b;
      batch_var = var_z;
      const float inv_std = rsqrtf(batch_var + f.eps);
      a = s * g * inv_std;
      c = s * (be - g * mean * inv_std);
    }
    if (f.running_mean != nullptr) {
      const float factor =
          f.cumulative ? 1.0f / static_cast<float>(*f.num_batches_tracked) : f.momentum;
      const float unbiased = f.M > 1 ? batch_var * (static_cast<float>(f.M) / (f.M - 1)) : batch_var;
      f.running_mean[n] = (1.f - factor) * f.running_mean[n] + factor * batch_mean;
      f.running_var[n] = (1.f - factor) * f.running_var[n] + factor * unbiased;
    }
  } else {
    const float inv_std = rsqrtf(f.running_var[n] + f.eps);
    const float rm = f.running_mean[n];
    if (P == Problem::kGemmScaleBn) {
      a = g * s * inv_std;
      c = be + g * (s * b - rm) * inv_std;
    } else {
      a = s * g * inv_std;
      c = s * (be + g * (b - rm) * inv_std);
    }
  }
  f.col_a[n] = a;
  f.col_c[n] = c;
}

constexpr int kApplyThreads = 256;
constexpr size_t kApplyMaxBlocks = 4096;

// out = a[n]*z + c[n], in place over z; 16-byte accesses when rows allow.
__global__ void __launch_bounds__(kApplyThreads)
    bn_apply_kernel(float* z, int M, int N, const float* __restrict__ col_a,
                    const float* __restrict__ col_c) {
  const size_t total = static_cast<size_t>(M) * N;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  if (N % 4 == 0) {
    float4* z4 = reinterpret_cast<float4*>(z);
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total / 4;
         i += stride) {
      const int n = static_cast<int>((i * 4) % N);
      float4 v = z4[i];
      v.x = fmaf(col_a[n + 0], v.x, col_c[n + 0]);
      v.y = fmaf(col_a[n + 1], v.y, col_c[n + 1]);
      v.z = fmaf(col_a[n + 2], v.z, col_c[n + 2]);
      v.w = fmaf(col_a[n + 3], v.w, col_c[n + 3]);
      z4[i] = v;
    }
  } else {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
         i += stride) {
      const int n = static_cast<int>(i % N);
      z[i] = fmaf(col_a[n], z[i], col_c[n]);
    }
  }
}

constexpr int kSoftmaxThreads = 512;
// Rows up to this size stay in shared memory between the softmax passes.
constexpr size_t kSoftmaxRowCacheBytes = 64 * 1024;

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kWarps = kSoftmaxThreads / 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : (is_max ? -INFINITY : 0.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  return v;
}

// One CTA per row: v = a*z + c, out = softmax(v) in place. With kCacheRow the row's v stays in
// shared memory (one read and one write of z); otherwise v is recomputed from z on each pass.
template <bool kCacheRow>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(float* z, int N, const float* __restrict__ col_a,
                        const float* __restrict__ col_c) {
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[32];
  float* row = z + static_cast<size_t>(blockIdx.x) * N;
  float mx = -INFINITY;
  for (int n = threadIdx.x; n < N; n += kSoftmaxThreads) {
    const float v = fmaf(col_a[n], row[n], col_c[n]);
    if (kCacheRow) row_cache[n] = v;
    mx = fmaxf(mx, v);
  }
  mx = block_reduce(mx, true, scratch);
  float sum = 0.f;
  for (int n = threadIdx.x; n < N; n += kSoftmaxThreads) {
    const float v = kCacheRow ? row_cache[n] : fmaf(col_a[n], row[n], col_c[n]);
    sum += expf(v - mx);
  }
  sum = block_reduce(sum, false, scratch);
  const float inv = 1.0f / sum;
  for (int n = threadIdx.x; n < N; n += kSoftmaxThreads) {
    const float v = kCacheRow ? row_cache[n] : fmaf(col_a[n], row[n], col_c[n]);
    row[n] = expf(v - mx) * inv;
  }
}

}  // namespace kgen
