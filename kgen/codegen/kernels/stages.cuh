// The plain CUDA kernels around the GEMM that every module's stages are made of, each driven by
// a generated struct (kgen/lower/forward.py) with static device functions:
//   column_stats_kernel   BatchNorm's per-tile column partials of S when not fused into the GEMM
//   bn_finalize_kernel    the partials (or running statistics) -> per-column a, c; running buffers
//   pointwise_kernel      dst = Stage::apply(src) element-wise (stage 2, or a cuBLAS GEMM's epilogue)
//   row_kernel            one CTA per row: Stage::row() runs the row's passes (row reductions,
//                         GroupNorm's group statistics, pooling, the output)
//   tail_kernel           an output of its own shape, broadcast from the stages' result
// (the matrix-vector rewrite's kernels are gemv.cuh's, a constant output's constant.cuh's).
//
// BatchNorm's math (training mode): for t the BatchNorm input, BN(t) = gamma * (t - mean) /
// sqrt(var + eps) + beta = a * t + c with a = gamma / sqrt(var + eps), c = beta - a * mean; mean
// and the biased var over the batch. The running buffers get mean and the unbiased var. Eval:
// the same a, c from the running statistics.
#pragma once

namespace kgen {

// Rows of z summarized by one statistics partial when the GEMM does not produce them.
constexpr int kStatsTileRows = 128;
constexpr int kStatsTileCols = 64;
constexpr int kStatsThreads = 256;

// Per-(row tile, column) mean and M2 of BnInput::stat of z (z itself in an fp32 build), the
// same partial layout the fused epilogue writes.
template <class BnInput>
__global__ void __launch_bounds__(kStatsThreads)
    column_stats_kernel(const float* __restrict__ z, int M, int N, float* part_mean,
                        float* part_m2, EpilogueParams p) {
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
  tile_column_stats<kStatsTileRows, kStatsTileCols, kStatsThreads>(
      tile, ldt, rows, n0, N, blockIdx.y, part_mean, part_m2,
      [&](float v, int n) { return BnInput::stat(v, n, p); });
}

struct FinalizeArgs {
  const float* part_mean;  // [tiles][N]
  const float* part_m2;    // [tiles][N]
  int rows_per_tile;       // every tile but the last holds this many rows
  int M, N;
  // BatchNorm's parameters and running buffers, in the parameters' type (Param: the module's
  // dtype, fp32 in the build for autocast): a 16-bit module's running statistics are computed in
  // fp32 and stored rounded, as torch's are.
  const Param* gamma;      // [N], nullptr when BatchNorm has no affine weight
  const Param* beta;       // [N], nullptr when BatchNorm has no affine bias
  Param* running_mean;     // [N], nullptr: no running statistics to update (or read)
  Param* running_var;      // [N]
  const long long* num_batches_tracked;  // already incremented for this call
  float momentum;
  bool cumulative;         // momentum=None: factor 1/num_batches_tracked
  bool training;           // batch statistics (else the running ones)
  float eps;
  float* col_a;            // [N] out
  float* col_c;            // [N] out
  float* col_at;           // [N] out: BN(t) = col_at * t + col_ct, for t itself (EpilogueParams)
  float* col_ct;           // [N] out
  // [N] out, for the backward (nullptr: not wanted): x̂ = col_xa * S + col_xc, col_gi = γ / σ.
  float* col_xa;
  float* col_xc;
  float* col_gi;
};

// The finalize kernel's CTA: kFinalizeColumns columns (a warp's lanes, coalesced reads of the
// partials), each column's tile partials split over kFinalizeSplits warps. One thread per column
// merging every partial in turn waited on each load: 0.067 ms for KernelBench 39's 128 partials
// of 4096 columns on an H200 (16 CTAs), where the GEMM before it takes 0.8.
constexpr int kFinalizeColumns = 32;
constexpr int kFinalizeSplits = 8;

// GroupNorm's statistics as torch's CUDA kernel takes them for a group of fewer than 512
// elements (RowwiseMomentsCUDAKernel with one warp): each lane a Welford state over the elements
// it strides (welford_add, WelfordOps::reduce), then the warp's tree (cuda_utils::WarpReduce:
// offsets 16, 8, 4, 2, 1, lane l combining lane l + offset's state, WelfordOps::combine); lane 0
// ends with the group's. The expressions are torch's, so that nvcc contracts them the same way.
// A 16-bit module's GroupNorm uses it: there kgen's output is compared with eager's own, whose
// one-step differences KernelBench's bf16 tolerance does not cover (docs/perf.md, session 9).
struct Welford {
  float mean = 0.f, m2 = 0.f, nf = 0.f;
  int n = 0;
};
// x / d for a count d (a positive whole number as a float). kPow2Products: where d is a power of
// two, x times 1 / d (exact), which IEEE rounds to the same quotient, without the division's
// subroutine (a group of 64 elements in a warp divides by 1 and 2 per lane, and its tree by 2,
// 4, ... 32: KernelBench 37's bf16 forward 1.535 -> 1.504 ms, docs/perf.md, session 33); __fmul_rn,
// so that nvcc does not contract the product into an fma with what follows, which the division's
// result never is. The same bits either way: the backward's row kernel, whose registers the branch
// made spill, divides.
template <bool kPow2Products>
__device__ __forceinline__ float div_by_count(float x, float d) {
  if constexpr (kPow2Products) {
    const unsigned bits = __float_as_uint(d);
    if ((bits & 0x7fffffu) == 0u) return __fmul_rn(x, __uint_as_float(0x7f000000u - bits));
  }
  return x / d;
}
template <bool kPow2Products = false>
__device__ __forceinline__ void welford_add(Welford& acc, float data) {
  const int new_n = acc.n + 1;
  const float new_nf = static_cast<float>(new_n);
  const float delta = data - acc.mean;
  const float new_mean = acc.mean + div_by_count<kPow2Products>(delta, new_nf);
  const float new_delta = data - new_mean;
  acc.m2 = acc.m2 + delta * new_delta;
  acc.mean = new_mean;
  acc.n = new_n;
  acc.nf = new_nf;
}
// Two Welford states as one (WelfordOps::combine; `n` is not kept: nf counts). Also the merge of
// BatchNorm's tile partials in bn_finalize_kernel (Chan's merge, an empty state taking the other).
template <bool kPow2Products = false>
__device__ __forceinline__ Welford welford_combine(Welford a, const Welford& b) {
  if (a.nf == 0.f) {
    a = b;
  } else if (b.nf != 0.f) {
    const float delta = b.mean - a.mean;
    const float new_count = a.nf + b.nf;
    const float nb_over_n = div_by_count<kPow2Products>(b.nf, new_count);
    a.mean = a.mean + delta * nb_over_n;
    a.m2 = a.m2 + b.m2 + delta * delta * a.nf * nb_over_n;
    a.nf = new_count;
  }
  return a;
}
// The Welford states of each segment of kLanes lanes (a power of two) combined into its first
// lane, as torch's warp reduction combines a warp's (shuffles down by 16, 8, ..., 1): where only a
// segment's lanes hold elements, the steps beyond it combine empty states (the other taken as it
// is), so the segment's lane 0 gets the whole warp's bits.
template <int kLanes, bool kPow2Products = false>
__device__ __forceinline__ Welford welford_lanes_reduce(Welford a) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power of two up to 32");
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) {
    Welford b;
    b.mean = __shfl_down_sync(0xffffffffu, a.mean, offset, kLanes);
    b.m2 = __shfl_down_sync(0xffffffffu, a.m2, offset, kLanes);
    b.nf = __shfl_down_sync(0xffffffffu, a.nf, offset, kLanes);
    a = welford_combine<kPow2Products>(a, b);
  }
  return a;
}
template <bool kPow2Products = false>
__device__ __forceinline__ Welford welford_warp_reduce(Welford a) { return welford_lanes_reduce<32, kPow2Products>(a); }
// torch's warp tree over kTorchLanes lanes (a power of two up to 32: those that hold elements of
// a group; the steps beyond combine empty states) on kLanes lanes a group, each lane p holding the
// states of torch's lanes p, p + kLanes, ... in acc[0], acc[1], ...: the steps at offsets of
// kLanes and more combine states within the lane, the rest shuffle (welford_lanes_reduce); the
// same combines in the same order, so the same bits, with fewer shuffles and more groups a warp.
template <int kTorchLanes, int kLanes, bool kPow2Products = false>
__device__ __forceinline__ Welford welford_virtual_reduce(Welford (&acc)[kTorchLanes / kLanes]) {
  static_assert(kLanes >= 1 && kLanes <= kTorchLanes && kTorchLanes <= 32 && kTorchLanes % kLanes == 0,
                "kLanes lanes holding kTorchLanes lanes' states");
#pragma unroll
  for (int offset = kTorchLanes / 2; offset >= kLanes; offset >>= 1) {
#pragma unroll
    for (int held = 0; held < offset / kLanes; ++held) {
      acc[held] = welford_combine<kPow2Products>(acc[held], acc[held + offset / kLanes]);
    }
  }
  return welford_lanes_reduce<kLanes, kPow2Products>(acc[0]);
}

// One column per lane of warp 0, after the CTA's warps merged its partials. In an fp32 build the statistics are those of S, what stage 1 stores
// (a 16-bit build's are of t itself, BnInput::kStatsOfT: no move below); BatchNorm's input
// is t = scale * S + shift per column (BnInput, generated: the input's affine prefix, e.g. a
// Linear bias and a per-feature scale), so mean_t = scale * mean_S + shift and var_t = scale^2
// * var_S. Training: Chan-merge the tile partials in a fixed order (deterministic, no atomics),
// update the running buffers with mean_t and the unbiased var_t as BatchNorm1d does, and fold
// everything into a, c with BN(t) = a * S + c: a = scale * gamma / sqrt(var_t + eps) and
// c = beta - a * mean_S (the shift cancels). Eval: the same from the running statistics,
// c = beta - gamma / sqrt(var + eps) * (running_mean - shift). col_at, col_ct are the same
// BatchNorm unfolded, for t itself: a 16-bit module's epilogue computes t rounded as torch's
// ops round it (z + b, then * scale, each to bf16 / fp16) and normalizes that, as eager does.
template <class BnInput>
__global__ void __launch_bounds__(kFinalizeColumns * kFinalizeSplits)
    bn_finalize_kernel(FinalizeArgs f, EpilogueParams p) {
  const int n = blockIdx.x * kFinalizeColumns + threadIdx.x;
  // Training: each warp merges a contiguous run of the tile partials in tile order (welford_combine:
  // Chan's merge, an empty state taking the other as it is), then warp 0 merges the warps'
  // summaries in warp order: a fixed order, deterministic, no atomics.
  __shared__ float summary[3][kFinalizeSplits][kFinalizeColumns];
  Welford acc;
  if (f.training) {
    const int tiles = (f.M + f.rows_per_tile - 1) / f.rows_per_tile;
    const int per = (tiles + kFinalizeSplits - 1) / kFinalizeSplits;
    const int first = threadIdx.y * per, last = min(tiles, first + per);
    if (n < f.N) {
      for (int t = first; t < last; ++t) {
        const float nb = static_cast<float>(min(f.rows_per_tile, f.M - t * f.rows_per_tile));
        acc = welford_combine(acc, Welford{f.part_mean[static_cast<size_t>(t) * f.N + n],
                                           f.part_m2[static_cast<size_t>(t) * f.N + n], nb, 0});
      }
    }
    summary[0][threadIdx.y][threadIdx.x] = acc.nf;
    summary[1][threadIdx.y][threadIdx.x] = acc.mean;
    summary[2][threadIdx.y][threadIdx.x] = acc.m2;
  }
  __syncthreads();
  if (threadIdx.y != 0 || n >= f.N) return;
  const float g = f.gamma != nullptr ? as_float(f.gamma[n]) : 1.f;
  const float be = f.beta != nullptr ? as_float(f.beta[n]) : 0.f;
  float scale, shift;
  BnInput::affine(n, p, scale, shift);
  float centre, var, mean_t;  // centre: mean_t - shift
  if (f.training) {
    for (int w = 1; w < kFinalizeSplits; ++w) {
      acc = welford_combine(acc, Welford{summary[1][w][threadIdx.x], summary[2][w][threadIdx.x],
                                         summary[0][w][threadIdx.x], 0});
    }
    float mean = acc.mean;
    const float m2 = acc.m2, count = acc.nf;
    // torch's Welford statistics meet inf - inf where a column holds an infinite value among
    // other rows: its mean is NaN there, where the partials' mean is inf (one partial: a batch of
    // at most a tile's rows with exact products, seen on the H100 at 7 rows).
    if (isinf(mean) && f.M > 1) mean = __int_as_float(0x7fffffff);
    if constexpr (BnInput::kStatsOfT) {
      // A 16-bit build's partials are of t itself, rounded as eager's BatchNorm sees it
      // (BnInput::stat); biased, as BatchNorm normalizes with. (An fp32 build's are of S.)
      mean_t = mean;
      centre = mean_t - shift;
      var = m2 / count;
    } else {
      centre = scale * mean;
      mean_t = centre + shift;
      // biased, as BatchNorm normalizes with. The shift cancels out of t - mean_t in exact
      // arithmetic, but not in torch's when it is NaN or infinite (t is then NaN or inf in every
      // row, its variance NaN): 0 * shift carries that into var (and so into the output and
      // running_var), and is 0 otherwise.
      var = scale * scale * (m2 / count) + 0.f * shift;
    }
    if (f.running_mean != nullptr) {
      const float factor =
          f.cumulative ? 1.0f / static_cast<float>(*f.num_batches_tracked) : f.momentum;
      const float unbiased = f.M > 1 ? var * (static_cast<float>(f.M) / (f.M - 1)) : var;
      store_as(&f.running_mean[n], (1.f - factor) * as_float(f.running_mean[n]) + factor * mean_t);
      store_as(&f.running_var[n], (1.f - factor) * as_float(f.running_var[n]) + factor * unbiased);
    }
  } else {
    mean_t = as_float(f.running_mean[n]);
    centre = mean_t - shift;
    var = as_float(f.running_var[n]);
  }
  const float a = g / sqrtf(var + f.eps);
  f.col_a[n] = a * scale;
  f.col_c[n] = be - a * centre;
  f.col_at[n] = a;
  f.col_ct[n] = be - a * mean_t;
  if (f.col_xa != nullptr) {
    // x̂ = (t - mean_t) / σ = (scale * S - centre) / σ: from S, not t, so the shift (a Linear
    // bias) does not cancel digits away.
    const float inv_std = 1.0f / sqrtf(var + f.eps);
    f.col_xa[n] = scale * inv_std;
    f.col_xc[n] = -centre * inv_std;
    f.col_gi[n] = g * inv_std;
  }
}

constexpr int kApplyThreads = 256;
constexpr size_t kApplyMaxBlocks = 4096;

// pointwise_kernel's layout. A thread takes a chunk of `vector` consecutive columns of a row (4
// floats or 8 halves: 16-byte accesses, where N and the pointers allow; else 1) and walks down
// the rows: its column, and so its per-column operands, stay the same from row to row (which
// kApplyRowsPerStep uses), and no index is divided in the loop. A CTA's threads cover `lanes`
// chunks of a row (every chunk of a narrow row), kApplyThreads / lanes rows at a time.
template <class Out>
__host__ __device__ inline int pointwise_vector(const void* src, const void* dst, int N) {
  constexpr int kVector = std::is_same<Out, float>::value ? 4 : 8;
  return N % kVector == 0 && ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0
             ? kVector : 1;
}
__host__ __device__ inline int pointwise_lanes(int chunks) {
  return chunks < 1 ? 1 : (chunks < kApplyThreads ? chunks : kApplyThreads);
}

template <class Stage>
__device__ __forceinline__ void apply_quad(float4& v, int m, int n, const EpilogueParams& p) {
  v.x = Stage::apply(v.x, m, n + 0, p);
  v.y = Stage::apply(v.y, m, n + 1, p);
  v.z = Stage::apply(v.z, m, n + 2, p);
  v.w = Stage::apply(v.w, m, n + 3, p);
}

// Rows a thread of pointwise_kernel takes per step, all loaded before any is stored: the same
// columns' operands (a bias, BatchNorm's a and c), loaded once for the step's rows instead of
// once per element. Nsight Compute on KernelBench 39's bf16 BatchNorm stage 2 (an H200), one
// row per step: L1 95 % busy with those loads (93.7 % hits), warps waiting on the load queue,
// DRAM at 27 %.
constexpr int kApplyRowsPerStep = 4;

// The float4s of a chunk of src at s: fp32, or (kQuads 2) eight values of a 16-bit S in one
// 16-byte load.
template <int kQuads, class Src>
__device__ __forceinline__ void load_chunk(const Src* s, float4 (&v)[kQuads]) {
  if constexpr (std::is_same<Src, float>::value) {
#pragma unroll
    for (int q = 0; q < kQuads; ++q) v[q] = *reinterpret_cast<const float4*>(s + 4 * q);
  } else {
    static_assert(kQuads == 2, "a 16-bit S goes with a 16-bit output (forward.cuh, StageInput)");
    const uint4 raw = *reinterpret_cast<const uint4*>(s);
    const Src* h = reinterpret_cast<const Src*>(&raw);
    v[0] = make_float4(as_float(h[0]), as_float(h[1]), as_float(h[2]), as_float(h[3]));
    v[1] = make_float4(as_float(h[4]), as_float(h[5]), as_float(h[6]), as_float(h[7]));
  }
}

// dst = Stage::apply(src) element-wise over [M][N] (dst may be src). dst's elements are Out:
// fp32, or the module's 16-bit dtype (the part's output, forward.cuh's Output; dst then is not
// src), rounded as torch rounds; src's are fp32, or that dtype (forward.cuh, StageInput).
// Launched on pointwise_grid's grid of kApplyThreads threads.
template <class Stage, class Out = float, class Src = float>
__global__ void __launch_bounds__(kApplyThreads)
    pointwise_kernel(const Src* src, Out* dst, int M, int N, EpilogueParams p) {
  const int vector = pointwise_vector<Out>(src, dst, N);
  const int chunks = N / vector;
  const int lanes = pointwise_lanes(chunks);
  const int rows = kApplyThreads / lanes;   // rows a CTA covers at a time
  const int row = threadIdx.x / lanes;
  const int chunk = blockIdx.x * lanes + threadIdx.x % lanes;
  if (row >= rows || chunk >= chunks) return;
  const int n = chunk * vector;
  const int step = gridDim.y * rows;
  int m = blockIdx.y * rows + row;
  if (vector == 1) {
    for (; m < M; m += step) {
      const size_t at = static_cast<size_t>(m) * N + n;
      dst[at] = OutputType<Out>::one(Stage::apply(as_float(src[at]), m, n, p));
    }
    return;
  }
  constexpr int kQuads = std::is_same<Out, float>::value ? 1 : 2;   // float4s per chunk
  auto store = [&](int row_m, const float4 (&v)[kQuads]) {
    Out* const d = dst + static_cast<size_t>(row_m) * N + n;
    if constexpr (kQuads == 1) {
      *reinterpret_cast<float4*>(d) = v[0];
    } else {
      OutputType<Out>::eight(d, v[0], v[1]);
    }
  };
  for (; m + (kApplyRowsPerStep - 1) * step < M; m += kApplyRowsPerStep * step) {
    float4 v[kApplyRowsPerStep][kQuads];
#pragma unroll
    for (int r = 0; r < kApplyRowsPerStep; ++r) load_chunk(src + static_cast<size_t>(m + r * step) * N + n, v[r]);
#pragma unroll
    for (int r = 0; r < kApplyRowsPerStep; ++r) {
#pragma unroll
      for (int q = 0; q < kQuads; ++q) apply_quad<Stage>(v[r][q], m + r * step, n + 4 * q, p);
    }
#pragma unroll
    for (int r = 0; r < kApplyRowsPerStep; ++r) store(m + r * step, v[r]);
  }
  for (; m < M; m += step) {
    float4 v[kQuads];
    load_chunk(src + static_cast<size_t>(m) * N + n, v);
#pragma unroll
    for (int q = 0; q < kQuads; ++q) apply_quad<Stage>(v[q], m, n + 4 * q, p);
    store(m, v);
  }
}

// The grid of pointwise_kernel<Stage, Out> over [M][N]: x covers a row's chunks, y the rows, sized
// so that a thread's rows come kApplyRowsPerStep to a step (about that many rows a thread, fewer at
// a small batch, more where the grid reaches kApplyMaxBlocks CTAs). A grid of one row per thread
// (KernelBench 97's 1024 rows) ran the four-row kernel's tail loop alone, 4 % slower than before.
template <class Out, class Src>
inline dim3 pointwise_grid(const Src* src, const Out* dst, int M, int N) {
  const int chunks = N / pointwise_vector<Out>(src, dst, N);
  const int lanes = pointwise_lanes(chunks);
  const int x = std::max(1, (chunks + lanes - 1) / lanes);
  const long long rows = static_cast<long long>(kApplyThreads / lanes) * kApplyRowsPerStep;
  const long long needed = (static_cast<long long>(M) + rows - 1) / rows;
  const long long most = std::max<long long>(1, static_cast<long long>(kApplyMaxBlocks) / x);
  return dim3(x, static_cast<unsigned>(std::max<long long>(1, std::min({needed, most, 65535LL}))));
}
// The grid of a flat grid-stride kernel (fill_kernel) over M x N elements.
inline int pointwise_blocks(int M, int N) {
  const size_t items = static_cast<size_t>(M) * N;
  return static_cast<int>(std::min<size_t>((items + kApplyThreads - 1) / kApplyThreads, kApplyMaxBlocks));
}

constexpr int kRowThreads = 512;
// The row kernel's threads for rows of N columns: eight columns a thread, in whole warps, from 64
// (two warps: 32 CTAs an SM, the most an SM holds, then fill its 2048 threads) to kRowThreads.
// Short rows are latency-bound, not bandwidth-bound: 512 threads over KernelBench 45's 1024
// columns (two a thread, four CTAs an SM) took 0.079 ms for 64 MB (docs/perf.md, session 32).
inline int row_threads(int N) {
  const int threads = (N / 8 + 31) / 32 * 32;
  return std::max(64, std::min(kRowThreads, threads));
}
// Rows up to this size stay in shared memory between the passes of the row kernel.
constexpr size_t kRowCacheBytes = 64 * 1024;

// max and min that propagate NaN as torch's amax / amin / max(dim) do (fmaxf and fminf drop a
// NaN operand): NaN if either operand is NaN.
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float nan_min(float a, float b) { return (a < b || a != a) ? a : b; }
// Reduction of one value per thread over the CTA (whole warps, at most kRowThreads threads);
// every thread gets the result. kind: 0 sum, 1 max, 2 min.
__device__ __forceinline__ float combine(float a, float b, int kind) {
  return kind == 0 ? a + b : (kind == 1 ? nan_max(a, b) : nan_min(a, b));
}
__device__ __forceinline__ float block_reduce(float v, int kind, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o), kind);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const float identity = kind == 0 ? 0.f : (kind == 1 ? -INFINITY : INFINITY);
  v = lane < warps ? scratch[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o), kind);
  return v;
}
// A row of S into shared memory by the CTA's threads, each with four loads in flight before their
// stores, of 16 bytes where the row allows: a loop of one load and then its store streamed S at
// ~1 TB/s on an H100 (a 4096-float row per 512 threads; docs/perf.md, session 28), four floats in
// flight a thread left a row kernel latency-bound (session 32).
// A row of S in a 16-bit module's dtype (forward.cuh, StageInput) is widened to fp32 on the way:
// 16 bytes (eight elements) a load, four in flight a thread.
template <class T>
__device__ __forceinline__ void copy_row(const T* __restrict__ src, float* __restrict__ dst, int N) {
  static_assert(sizeof(T) == 2, "a 16-bit S (fp32: the overload below)");
  const int step = blockDim.x;
  int n = threadIdx.x;
  if (N % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    const uint4* __restrict__ s8 = reinterpret_cast<const uint4*>(src);
    float4* __restrict__ d4 = reinterpret_cast<float4*>(dst);
    const int octets = N / 8;
    auto put = [&](int i, const uint4& v) {
      const T* e = reinterpret_cast<const T*>(&v);
      d4[2 * i] = make_float4(as_float(e[0]), as_float(e[1]), as_float(e[2]), as_float(e[3]));
      d4[2 * i + 1] = make_float4(as_float(e[4]), as_float(e[5]), as_float(e[6]), as_float(e[7]));
    };
    for (; n + 3 * step < octets; n += 4 * step) {
      const uint4 a = __ldg(s8 + n), b = __ldg(s8 + n + step), c = __ldg(s8 + n + 2 * step),
                  d = __ldg(s8 + n + 3 * step);
      put(n, a);
      put(n + step, b);
      put(n + 2 * step, c);
      put(n + 3 * step, d);
    }
    for (; n < octets; n += step) put(n, __ldg(s8 + n));
    return;
  }
  for (; n < N; n += step) dst[n] = as_float(src[n]);
}
__device__ __forceinline__ void copy_row(const float* __restrict__ src, float* __restrict__ dst, int N) {
  const int step = blockDim.x;
  int n = threadIdx.x;
  if (N % 4 == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    const float4* __restrict__ s4 = reinterpret_cast<const float4*>(src);
    float4* __restrict__ d4 = reinterpret_cast<float4*>(dst);
    const int quads = N / 4;
    for (; n + 3 * step < quads; n += 4 * step) {
      const float4 a = __ldg(s4 + n), b = __ldg(s4 + n + step), c = __ldg(s4 + n + 2 * step),
                   d = __ldg(s4 + n + 3 * step);
      d4[n] = a;
      d4[n + step] = b;
      d4[n + 2 * step] = c;
      d4[n + 3 * step] = d;
    }
    for (; n < quads; n += step) d4[n] = __ldg(s4 + n);
    return;
  }
  for (; n + 3 * step < N; n += 4 * step) {
    const float a = __ldg(src + n), b = __ldg(src + n + step), c = __ldg(src + n + 2 * step),
                d = __ldg(src + n + 3 * step);
    dst[n] = a;
    dst[n + step] = b;
    dst[n + 2 * step] = c;
    dst[n + 3 * step] = d;
  }
  for (; n < N; n += step) dst[n] = __ldg(src + n);
}
// Sum over each segment of kLanes lanes (a power of two), every lane of it gets the same result
// (a butterfly: deterministic; where only a segment's lanes hold values, the whole warp's sum adds
// zeros beyond it: the same bits).
template <int kLanes>
__device__ __forceinline__ float lanes_sum(float v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power of two up to 32");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return lanes_sum<32>(v); }
__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce(v, 0, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce(v, 1, scratch); }
__device__ __forceinline__ float block_min(float v, float* scratch) { return block_reduce(v, 2, scratch); }

// One CTA per row m: Stage::row reads the row of S at src + m * N and writes the row's output at
// dst + m * dst_stride (N for an (M, N) output, 1 for (M, 1) or (M,)), of Out (fp32, or the
// module's 16-bit dtype: OutputType). With kCacheRow the row (of S, or of the first pass's
// value: kgen/lower/forward.py, _cache_node) stays in shared memory after the first pass (one
// read of S from global memory).
// kAtTracedWidth: N is Stage::kTracedWidth, the width the module was traced at (its GroupNorms'
// group sizes are constants there: kgen/lower/forward.py, AT_TRACED_WIDTH).
// In: S's type (fp32, or the module's 16-bit dtype: forward.cuh, StageInput).
template <class Stage, bool kCacheRow, class Out = float, bool kAtTracedWidth = false, class In = float>
__global__ void __launch_bounds__(kRowThreads)
    row_kernel(const In* src, Out* dst, int N, int dst_stride, EpilogueParams p) {
  extern __shared__ __align__(16) float row_cache[];
  __shared__ float scratch[32];
  const size_t m = blockIdx.x;
  Stage::template row<kCacheRow, Out, kAtTracedWidth>(src + m * N, dst + m * dst_stride, static_cast<int>(m), N, p,
                                                      row_cache, scratch);
}

// ---- the rewrites' kernels, in files of their own (gemv.cuh: a row sum of the GEMM output as a
// matrix-vector product; constant.cuh: a constant output), which a translation unit inlines only
// where a part uses them (kgen/codegen/generator.py, KERNEL_LIBRARY). Declared here for
// forward.cuh, whose other parts discard the branches that call them; and the partials' layout of
// the matrix-vector rewrite, which sizes every part's workspace (entry.cuh, gemv_floats).
constexpr int kColSumRows = 64;  // rows of W summed by one partial
__host__ __device__ inline int colsum_chunks(int N) { return (N + kColSumRows - 1) / kColSumRows; }
// (x and w of one type T; W a template parameter of its own so that the discarded branch of a
// build whose w is fp32 beside 16-bit x resolves the call: KGEN_FP32_WEIGHT, which no rewrite runs.)
template <class Affine, class Rows, class T, class W>
cudaError_t launch_gemv(const T* x, const W* w, int M, int N, int K, const EpilogueParams& p,
                        float* workspace, float* out, float* kept_sums, float* kept_w_sum, cudaStream_t stream);
__global__ void fill_kernel(float* __restrict__ out, long long total, float value);
template <class Reads, class T, class W>
cudaError_t launch_constant_output(const T* x, const W* w, int M, int N, int K, const EpilogueParams& p, int width,
                                   float value, unsigned int* flag, float* out, cudaStream_t stream);

// ---- a broadcast tail: the output has a shape of its own (kgen/lower/forward.py, split_tail) ---------
constexpr int kTailThreads = 256;

// out[i] = Tail::at(i, t): every element of the output from the stages' core value t and the
// parameters, which Tail reads at the offsets torch's broadcasting gives; written in Out (the
// part's output type: fp32, or a 16-bit module's dtype), rounded as torch's .to rounds.
template <class Tail, class Out>
__global__ void __launch_bounds__(kTailThreads)
    tail_kernel(const float* __restrict__ t, Out* __restrict__ out, long long total, int M,
                EpilogueParams p) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total; i += step) {
    out[i] = OutputType<Out>::one(Tail::at(i, t, M, p));
  }
}

}  // namespace kgen
