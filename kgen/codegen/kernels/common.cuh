// kgen common kernel code: the GEMM epilogue contract shared by every mainloop.
//
// Plain CUDA, no torch headers: this file compiles with nvcc alone.
//
// Every GEMM computes z = x * w^T with x [M][K] and w [N][K], both row-major (K-major), the
// layout of nn.Linear. A CTA owns one BM x BN tile of z. After its mainloop it writes the fp32
// accumulators into a shared-memory tile (row-major, leading dimension ldt, ldt % 4 == 0) and
// calls tile_epilogue<..., EPI>(), which
//   1. takes each valid element v at (m, n) to EPI::apply(v, m, n, p) unless EPI::kIdentity
//      (EPI is a struct that kgen/lower/forward.py generates from the module's epilogue IR):
//      in the tile, in a pass of its own, when EPI::kColStats, else as step 3 stores it,
//   2. when EPI::kColStats, writes the tile's per-column (mean, M2) of the result over its valid
//      rows (BatchNorm's partial statistics),
//   3. stores the result to p.z, in fp32, or in the module's 16-bit dtype where EPI says so
//      (EPI::Store, EpilogueStore: the epilogue that writes a 16-bit module's output), and where
//      EPI keeps z (KeepingZ: the training forward of a point-wise part) v itself to p.z_kept.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

namespace kgen {

// What every C entry point does first. (1) Make the current device's primary context current on
// this thread: torch's autograd runs a backward on a thread of its own, where no context may be
// current yet, and the driver's tensor-map encoder (TMA) then refuses every device pointer
// ("invalid argument"; the first backward GEMM failed so in the GPU tests). (2) Clear an error
// an earlier runtime call of this thread left behind, which the launches' cudaGetLastError()
// would otherwise report; a sticky error (a kernel fault) is not cleared by this.
inline void enter() {
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) (void)cudaSetDevice(device);
  (void)cudaGetLastError();
}

// cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) on the current
// device, where this process has not set as much for Kernel there yet. The attribute stays set in
// the device's primary context (torch never resets it), and asking on every launch was host time
// before each forward's kernels start (docs/perf.md, session 48). Kernel is the kernel itself (a
// template argument: each instantiation keeps its own record). In an unnamed namespace: each
// library keeps its own record of its own kernels. (With external linkage, g++ makes the record a
// process-wide "unique" symbol wherever nvcc leaves kernels visible, as before CUDA 13.0: two
// builds whose kernels share a name, the plain and the autocast build of one file, would share
// it, and the second would launch without having allowed its shared memory.)
namespace {
template <auto Kernel>
inline cudaError_t allow_dynamic_smem(int bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> allowed[kMaxDevices] = {};
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const bool recorded = device >= 0 && device < kMaxDevices;
  if (recorded && allowed[device].load(std::memory_order_acquire) >= bytes) return cudaSuccess;
  e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess && recorded) {
    int before = allowed[device].load(std::memory_order_relaxed);
    while (before < bytes && !allowed[device].compare_exchange_weak(before, bytes)) {
    }
  }
  return e;
}
}  // namespace

// v rounded to the module's dtype T, to nearest even as torch's ops round their results: the
// identity for fp32 modules. The generated code rounds each op's result with it (lower/forward.py,
// Emitter), in every kernel of a 16-bit build (the GEMM's epilogue, the row and point-wise
// stages, the matrix-vector rewrite's rows). Not in the build for torch.autocast (KGEN_AUTOCAST:
// 16-bit operands of a module computing inside an autocast region, whose eager ops keep fp32
// results of autocast's fp32 ops): every op's result stays fp32 there, only the output rounded.
template <class T>
__device__ __forceinline__ float rounded_to_module(float v) {
  return v;
}
#ifndef KGEN_AUTOCAST
#ifdef __CUDA_BF16_TYPES_EXIST__
template <>
__device__ __forceinline__ float rounded_to_module<__nv_bfloat16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}
#endif
#ifdef __CUDA_FP16_TYPES_EXIST__
template <>
__device__ __forceinline__ float rounded_to_module<__half>(float v) {
  return __half2float(__float2half_rn(v));
}
#endif
#endif  // KGEN_AUTOCAST

// How a kernel writes an element of T, the type of the part's output (forward.cuh's Output), or
// of a buffer in the module's dtype (store_as): `one` converts a value. fp32, and bf16 and fp16
// where their headers came first (a 16-bit build: kernel.cu.j2), rounded to nearest even as
// torch's .to(dtype) rounds, with `eight`, a 16-byte store of eight consecutive values.
template <class T>
struct OutputType;
template <>
struct OutputType<float> {
  __device__ static __forceinline__ float one(float v) { return v; }
};
// bf16 and fp16: rounded to nearest even, as torch's .to(dtype) (and its kernels' stores) round,
// NaN and infinities kept; `eight` stores eight values with one 16-byte store (dst 16-byte
// aligned), in order.
#ifdef __CUDA_BF16_TYPES_EXIST__
template <>
struct OutputType<__nv_bfloat16> {
  __device__ static __forceinline__ __nv_bfloat16 one(float v) { return __float2bfloat16_rn(v); }
  __device__ static __forceinline__ uint32_t two(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // .x = a, at the lower address
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ static __forceinline__ void eight(__nv_bfloat16* dst, float4 lo, float4 hi) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(two(lo.x, lo.y), two(lo.z, lo.w), two(hi.x, hi.y), two(hi.z, hi.w));
  }
};
#endif
#ifdef __CUDA_FP16_TYPES_EXIST__
template <>
struct OutputType<__half> {
  __device__ static __forceinline__ __half one(float v) { return __float2half_rn(v); }
  __device__ static __forceinline__ uint32_t two(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);  // .x = a, at the lower address
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ static __forceinline__ void eight(__half* dst, float4 lo, float4 hi) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(two(lo.x, lo.y), two(lo.z, lo.w), two(hi.x, hi.y), two(hi.z, hi.w));
  }
};
#endif

// The type an epilogue struct stores into p.z: EPI::Store where it names one (StoringAs below,
// around the epilogue that writes a 16-bit module's output), else fp32.
template <class EPI, class = void>
struct EpilogueStore {
  using type = float;
};
template <class EPI>
struct EpilogueStore<EPI, std::void_t<typename EPI::Store>> {
  using type = typename EPI::Store;
};
// An epilogue that stores its result in T: stage 1's when it stores a 16-bit output (forward.cuh),
// and the forward that keeps z for the backward (backward.cuh).
template <class Epi, class T>
struct StoringAs : Epi {
  using Store = T;
};

// The parameters and buffers the generated epilogue reads, by index (lower.MAX_OPERANDS; a test
// ties the two).
constexpr int kMaxOperands = 16;

// The GEMM's operand type (the build's -DKGEN_OPERAND; kernel.cu.j2): x and w, and Dropout's
// mask (drawn in the dtype of the value it drops), are in it.
#ifndef KGEN_OPERAND
#define KGEN_OPERAND float
#endif
using Operand = KGEN_OPERAND;
// The parameters' and buffers' type: the module's dtype, the operands', so that a 16-bit module's
// go to the kernels as they are, with no conversion kernels (and no host time) before the launch;
// BatchNorm's running buffers are updated in it. In the build for torch.autocast (KGEN_AUTOCAST)
// fp32: an fp32 module's parameters and buffers stay fp32 there, as eager's ops read them (only
// the Linear's operands are converted), so a training BatchNorm's fp32 running buffers are
// updated in fp32, and a parameter added after the GEMM is not rounded to 16 bits. Every value
// is computed with in fp32 (as_float).
#ifdef KGEN_AUTOCAST
using Param = float;
#else
using Param = Operand;
#endif
__device__ __forceinline__ float as_float(float v) { return v; }
#ifdef __CUDA_BF16_TYPES_EXIST__
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
#endif
#ifdef __CUDA_FP16_TYPES_EXIST__
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }
#endif
// *dst = v in the buffer's dtype, rounded as the output's stores round (OutputType).
template <class T>
__device__ __forceinline__ void store_as(T* dst, float v) { *dst = OutputType<T>::one(v); }

// The inputs read after the GEMM whose gradients one part's backward sends (EpilogueParams::d_input's
// slots; kgen/lower/backward.py reads this number: max_input_gradients).
inline constexpr int kMaxInputGradients = 4;

struct EpilogueParams {
  float* z;                              // [M][N] row-major output of the stage
  float* part_mean;                      // [ceil(M / BM)][N] per-(m-tile, column) mean (kColStats)
  float* part_m2;                        // [ceil(M / BM)][N] per-(m-tile, column) sum (v-mean)^2
  const float* col_a;                    // [N] BatchNorm folded: BN(t) = a[n] * t + c[n]
  const float* col_c;                    // [N]
  // [N] BatchNorm of its input t itself: BN(t) = col_at[n] * t + col_ct[n]. A 16-bit module's
  // epilogue applies these to t rounded as torch's ops round it (kgen/lower/forward.py, Emitter).
  const float* col_at;
  const float* col_ct;
  // Per-column [N] or one-element parameters, a parameter of another shape (the broadcast tail),
  // or the module's input [M][K] read after the GEMM (Param), or a per-element [M][N] row-major
  // value (Dropout's mask, Operand; nullptr in eval mode); the generated code reads each as its
  // type (static_cast), through as_float.
  const void* operand[kMaxOperands];
  int N;                                 // columns of z: the row stride of a per-element operand
  // The staged backward's BatchNorm (kernels/backward.cuh), per column: x̂ = bn_xa * S + bn_xc for
  // S the root of BatchNorm's input, bn_gi = γ / σ, and the batch sums of the output's gradient
  // ȳ and of ȳ x̂; bn_training: batch statistics (else the running ones); inv_batch = 1 / M.
  const float* bn_xa;
  const float* bn_xc;
  const float* bn_gi;
  const float* bn_sum_y;
  const float* bn_sum_yx;
  int bn_training;
  float inv_batch;
  // Room for a split-K GEMM's partial tiles and per-tile arrival counters (WgmmaWsGemm, where
  // M leaves most SMs idle: entry.cuh sizes it); nullptr: the GEMM runs unsplit.
  float* split_partials;
  // w's split kept from call to call (fp16x3's WgmmaWsF16x3Gemm: w_split_floats floats, held by
  // the caller for each weight; entry.cuh); nullptr where the GEMM keeps none.
  float* w_split;
  // 1: the caller vouches that w_split is w's split as w is now, and the GEMM skips w's pass (the
  // emitted file where its user trusts torch's version counters: kgen_trust_weight_versions, w's
  // version unchanged since a call split it). 0: w's pass hashes every row of w and splits again
  // the rows that changed.
  int w_split_current;
  // The gradients of the inputs read after the GEMM (the module's, a residual, a gate: one slot
  // each, kgen/lower/backward.py's input_gradient_paths), each in its input's shape ([M][N] where a
  // row stage reads it per element), added to (zeroed by the caller; the C entry points each slot
  // into the one buffer it is handed); nullptr: none wanted. The stages add theirs per element,
  // the broadcast tail's reads through tail_operand_grads.
  float* d_input[kMaxInputGradients];
  // Where an epilogue that keeps z (KeepingZ) stores the accumulator as it is, [M][N] fp32, beside
  // its result in z.
  float* z_kept;
};

// A part's kind of backward (kgen/lower/backward.py writes these names, never the numbers): none, the
// point-wise struct Backward, the staged BackwardRows / BnSums / Prefix (backward.cuh runs them), or
// the matrix-vector rewrite's GemvRowsBackward / GemvColumnBackward (gemv_backward.cuh).
inline constexpr int kBackwardNone = 0;
inline constexpr int kBackwardPointwise = 1;
inline constexpr int kBackwardStaged = 2;
inline constexpr int kBackwardGemv = 3;

// An epilogue that stores the accumulator as it is (z, kept for a backward, and the backward's GEMMs).
struct StoreEpilogue {
  static constexpr bool kColStats = false;
  static constexpr bool kIdentity = true;
  __device__ static __forceinline__ float apply(float v, int, int, const EpilogueParams&) { return v; }
};

// The forward of a point-wise part that keeps z for its backward (backward.cuh, forward_keeping_z):
// EPI's result into p.z (in EPI's store type) and the accumulator as it is into p.z_kept, as the tile
// is stored (tile_epilogue), one pass over it. (EPI takes no column statistics: a part that does
// is staged, and its stages run on z itself.)
template <class EPI>
struct KeepingZ : EPI {
  static_assert(!EPI::kColStats, "a part whose epilogue takes column statistics keeps z as its stages' input");
  static constexpr bool kIdentity = false;
  static constexpr bool kKeepsZ = true;
};
template <class EPI, class = void>
struct EpilogueKeepsZ : std::false_type {};
template <class EPI>
struct EpilogueKeepsZ<EPI, std::void_t<decltype(EPI::kKeepsZ)>> : std::true_type {};

// Per-column two-pass statistics of the valid rows of a shared-memory tile. Two passes over
// shared memory (mean, then squared deviations from it) cost little next to the mainloop and
// keep M2 exact even when |mean| >> std, where sum(z^2) - n*mean^2 would cancel.
// `stat(v, n)`: the value the statistics are of, from the tile's value v at column n < N (an
// epilogue's stat: S itself in an fp32 build, BatchNorm's input t as eager rounds it in a 16-bit
// one).
template <int BM, int BN, int NTHREADS, class Stat>
__device__ __forceinline__ void tile_column_stats(const float* tile, int ldt, int rows, int n0,
                                                  int N, int m_tile, float* part_mean,
                                                  float* part_m2, Stat stat) {
  static_assert(NTHREADS % 32 == 0, "whole warps");
  // Threads split into row groups; within a group consecutive threads take consecutive columns
  // (conflict-free shared-memory reads). Partial sums across groups meet in `red`.
  // Threads beyond kGroups * kCols (a 384-thread CTA over 256 columns) only meet the barriers.
  constexpr int kCols = BN < NTHREADS ? BN : NTHREADS;
  constexpr int kGroups = NTHREADS / kCols;
  static_assert(BN % kCols == 0, "columns must tile the CTA evenly");
  __shared__ float red[kGroups][kCols];
  const int tid = threadIdx.x;
  const int col_in_pass = tid % kCols;
  const int group = tid < kGroups * kCols ? tid / kCols : kGroups;  // kGroups: idle
  const int rows_here = group < kGroups ? rows : 0;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int c0 = 0; c0 < BN; c0 += kCols) {
    const int c = c0 + col_in_pass;
    const bool in_n = n0 + c < N;
    float s = 0.f;
    if (in_n) {
      for (int r = group; r < rows_here; r += kGroups) s += stat(tile[r * ldt + c], n0 + c);
    }
    if (group < kGroups) red[group][col_in_pass] = s;
    __syncthreads();
    float mean = 0.f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) mean += red[g][col_in_pass];
    mean *= inv_rows;
    __syncthreads();
    float q = 0.f;
    if (in_n) {
      for (int r = group; r < rows_here; r += kGroups) {
        const float d = stat(tile[r * ldt + c], n0 + c) - mean;
        q = fmaf(d, d, q);
      }
    }
    if (group < kGroups) red[group][col_in_pass] = q;
    __syncthreads();
    if (group == 0 && n0 + c < N) {
      float m2 = 0.f;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) m2 += red[g][col_in_pass];
      part_mean[static_cast<size_t>(m_tile) * N + n0 + c] = mean;
      part_m2[static_cast<size_t>(m_tile) * N + n0 + c] = m2;
    }
    __syncthreads();
  }
}

// What the stores below do to each value on its way out: nothing, or (tile_epilogue) the
// generated epilogue, apply(value, row, column).
struct StoreAsIs {
  __device__ __forceinline__ float operator()(float v, int, int) const { return v; }
};

// Each of the tile's groups of W consecutive columns (BN / W of them a row) in its valid rows
// and columns (N % W == 0: a group is all in or all out), by the CTA's NTHREADS threads:
// store(r, c) for the group at tile row r, column c. Where the groups divide among the threads,
// each thread takes the same columns in every row it takes, so that their per-column operands
// (read with __ldg, lower/forward.py) are loads the compiler may keep across the rows; else (a
// tile wider than its threads by other than a power of two: BN = 96, 32 threads) a flat walk.
template <int BN, int W, int NTHREADS, class Store>
__device__ __forceinline__ void for_each_column_group(int rows, int n0, int N, Store store) {
  constexpr int kGroups = BN / W;
  if constexpr (NTHREADS % kGroups == 0) {
    const int c = (threadIdx.x % kGroups) * W;
    if (n0 + c >= N) return;
    for (int r = threadIdx.x / kGroups; r < rows; r += NTHREADS / kGroups) store(r, c);
  } else {
    for (int i = threadIdx.x; i < rows * kGroups; i += NTHREADS) {
      if (n0 + (i % kGroups) * W < N) store(i / kGroups, (i % kGroups) * W);
    }
  }
}

// Copy the valid part of a shared-memory tile to z, coalesced, 16-byte stores when the row
// pitch allows, each value through `apply` (the four or eight of a store read first: their
// operand loads overlap).
template <int BM, int BN, int NTHREADS, class Apply = StoreAsIs>
__device__ __forceinline__ void tile_store(const float* tile, int ldt, int m0, int n0, int M,
                                           int N, const EpilogueParams& p, Apply apply = {}) {
  static_assert(BN % 4 == 0, "BN must be a multiple of 4");
  const int rows = min(BM, M - m0);
  const bool vec = (N % 4 == 0) && ((reinterpret_cast<uintptr_t>(p.z) & 15) == 0);
  if (vec) {
    for_each_column_group<BN, 4, NTHREADS>(rows, n0, N, [&](int r, int c) {
      const int n = n0 + c;
      const float4 t = *reinterpret_cast<const float4*>(&tile[r * ldt + c]);
      *reinterpret_cast<float4*>(&p.z[static_cast<size_t>(m0 + r) * N + n]) =
          make_float4(apply(t.x, m0 + r, n), apply(t.y, m0 + r, n + 1), apply(t.z, m0 + r, n + 2),
                      apply(t.w, m0 + r, n + 3));
    });
  } else {
    for (int i = threadIdx.x; i < rows * BN; i += NTHREADS) {
      const int r = i / BN;
      const int c = i % BN;
      const int n = n0 + c;
      if (n >= N) continue;
      p.z[static_cast<size_t>(m0 + r) * N + n] = apply(tile[r * ldt + c], m0 + r, n);
    }
  }
}

// tile_store in T, a 16-bit module's dtype: p.z holds T elements, each the tile's value (through
// `apply`) rounded (OutputType), 8 per 16-byte store when the row pitch allows.
template <int BM, int BN, int NTHREADS, class T, class Apply = StoreAsIs>
__device__ __forceinline__ void tile_store_as(const float* tile, int ldt, int m0, int n0, int M,
                                              int N, const EpilogueParams& p, Apply apply = {}) {
  static_assert(sizeof(T) == 2 && BN % 8 == 0, "16-bit stores of 8 elements");
  const int rows = min(BM, M - m0);
  T* const z = reinterpret_cast<T*>(p.z);
  if (N % 8 == 0 && (reinterpret_cast<uintptr_t>(z) & 15) == 0) {
    for_each_column_group<BN, 8, NTHREADS>(rows, n0, N, [&](int r, int c) {
      const int n = n0 + c;
      const float* t = &tile[r * ldt + c];
      const float4 lo = *reinterpret_cast<const float4*>(t);
      const float4 hi = *reinterpret_cast<const float4*>(t + 4);
      const int m = m0 + r;
      OutputType<T>::eight(&z[static_cast<size_t>(m) * N + n],
                           make_float4(apply(lo.x, m, n), apply(lo.y, m, n + 1), apply(lo.z, m, n + 2), apply(lo.w, m, n + 3)),
                           make_float4(apply(hi.x, m, n + 4), apply(hi.y, m, n + 5), apply(hi.z, m, n + 6), apply(hi.w, m, n + 7)));
    });
  } else {
    for (int i = threadIdx.x; i < rows * BN; i += NTHREADS) {
      const int r = i / BN;
      const int c = i % BN;
      const int n = n0 + c;
      if (n >= N) continue;
      z[static_cast<size_t>(m0 + r) * N + n] = OutputType<T>::one(apply(tile[r * ldt + c], m0 + r, n));
    }
  }
}

// The tile as it is into p.z_kept (fp32) and through `apply` into p.z (T elements: fp32, or a
// 16-bit module's dtype, rounded: OutputType), each value read once; 16-byte stores when the row
// pitch allows (4 values a group in fp32, 8 in 16 bits).
template <int BM, int BN, int NTHREADS, class T, class Apply>
__device__ __forceinline__ void tile_store_keeping_z(const float* tile, int ldt, int m0, int n0, int M,
                                                     int N, const EpilogueParams& p, Apply apply) {
  constexpr int kQuads = std::is_same<T, float>::value ? 1 : 2;   // float4s a group
  static_assert(BN % (4 * kQuads) == 0, "whole groups of 16-byte stores");
  const int rows = min(BM, M - m0);
  T* const out = reinterpret_cast<T*>(p.z);
  float* const kept = p.z_kept;
  if (N % (4 * kQuads) == 0 && ((reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(kept)) & 15) == 0) {
    for_each_column_group<BN, 4 * kQuads, NTHREADS>(rows, n0, N, [&](int r, int c) {
      const int m = m0 + r;
      const int n = n0 + c;
      const size_t at = static_cast<size_t>(m) * N + n;
      float4 v[kQuads];
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        v[q] = *reinterpret_cast<const float4*>(&tile[r * ldt + c + 4 * q]);
        *reinterpret_cast<float4*>(&kept[at + 4 * q]) = v[q];
      }
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        v[q] = make_float4(apply(v[q].x, m, n + 4 * q), apply(v[q].y, m, n + 4 * q + 1),
                           apply(v[q].z, m, n + 4 * q + 2), apply(v[q].w, m, n + 4 * q + 3));
      }
      if constexpr (kQuads == 1) {
        *reinterpret_cast<float4*>(&out[at]) = v[0];
      } else {
        OutputType<T>::eight(&out[at], v[0], v[1]);
      }
    });
  } else {
    for_each_column_group<BN, 1, NTHREADS>(rows, n0, N, [&](int r, int c) {
      const int n = n0 + c;
      const size_t at = static_cast<size_t>(m0 + r) * N + n;
      const float v = tile[r * ldt + c];
      kept[at] = v;
      out[at] = OutputType<T>::one(apply(v, m0 + r, n));
    });
  }
}

// The tile to z in the type the epilogue stores (EpilogueStore), each value through `apply`.
template <int BM, int BN, int NTHREADS, class EPI, class Apply = StoreAsIs>
__device__ __forceinline__ void tile_store_for(const float* tile, int ldt, int m0, int n0, int M,
                                               int N, const EpilogueParams& p, Apply apply = {}) {
  if constexpr (std::is_same<typename EpilogueStore<EPI>::type, float>::value) {
    tile_store<BM, BN, NTHREADS>(tile, ldt, m0, n0, M, N, p, apply);
  } else {
    tile_store_as<BM, BN, NTHREADS, typename EpilogueStore<EPI>::type>(tile, ldt, m0, n0, M, N, p, apply);
  }
}

// The one entry point the GEMM mainloops call, by all NTHREADS threads of the CTA, after the
// accumulator tile is complete in shared memory (and a __syncthreads()). The generated epilogue
// runs on the tile by the whole CTA, consecutive threads on consecutive columns (coalesced
// operand loads): as the tile is stored, or, where column statistics are taken of its result,
// in a pass of its own before them.
template <int BM, int BN, int NTHREADS, class EPI>
__device__ __forceinline__ void tile_epilogue(float* tile, int ldt, int m0, int n0, int M, int N,
                                              const EpilogueParams& p) {
  if constexpr (EpilogueKeepsZ<EPI>::value) {
    tile_store_keeping_z<BM, BN, NTHREADS, typename EpilogueStore<EPI>::type>(
        tile, ldt, m0, n0, M, N, p, [&](float v, int m, int n) { return EPI::apply(v, m, n, p); });
    return;
  } else if constexpr (!EPI::kIdentity && !EPI::kColStats) {
    tile_store_for<BM, BN, NTHREADS, EPI>(tile, ldt, m0, n0, M, N, p,
                                          [&](float v, int m, int n) { return EPI::apply(v, m, n, p); });
    return;
  }
  const int rows = min(BM, M - m0);
  if constexpr (!EPI::kIdentity) {
    // Four consecutive columns a thread: their values read first and written last, so that
    // nothing between lets the compiler doubt that the four operand loads may overlap.
    static_assert(BN % 4 == 0, "BN must be a multiple of 4");
    constexpr int kQuads = BN / 4;
    for (int i = threadIdx.x; i < rows * kQuads; i += NTHREADS) {
      const int r = i / kQuads;
      const int c = (i % kQuads) * 4;
      float* const t = &tile[r * ldt + c];
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = t[e];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (n0 + c + e < N) v[e] = EPI::apply(v[e], m0 + r, n0 + c + e, p);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) t[e] = v[e];
    }
    __syncthreads();
  }
  if constexpr (EPI::kColStats) {
    tile_column_stats<BM, BN, NTHREADS>(tile, ldt, rows, n0, N, m0 / BM, p.part_mean, p.part_m2,
                                        [&](float v, int n) { return EPI::stat(v, n, p); });
  }
  tile_store_for<BM, BN, NTHREADS, EPI>(tile, ldt, m0, n0, M, N, p);
}

// The grid of a GEMM with one CTA per BM x BN tile of z, into `tiles`. Returns false when
// there is nothing to launch, with `status` saying why: success for an empty z, an error for
// negative sizes or more tiles than a grid holds.
template <int BM, int BN>
bool tile_grid(int M, int N, int K, unsigned& tiles, cudaError_t& status) {
  status = cudaSuccess;
  if (M < 0 || N < 0 || K < 0) status = cudaErrorInvalidValue;
  if (M <= 0 || N <= 0 || K < 0) return false;
  const long long n = static_cast<long long>(M / BM + (M % BM != 0)) * (N / BN + (N % BN != 0));
  if (n > 0x7fffffffLL) {
    status = cudaErrorInvalidValue;
    return false;
  }
  tiles = static_cast<unsigned>(n);
  return true;
}

// Stands for a GEMM computed outside these kernels (cuBLAS, called from the entry point).
struct ExternalGemm {
  static constexpr int kSmemBytes = 0;
  static constexpr int kThreads = 0;
};

// Grouped rasterization: CTAs that run together share rows of x and columns of w in L2.
// Maps a linear block index to (tile_m, tile_n) walking GROUP_M tile-rows at a time.
template <int GROUP_M>
__device__ __forceinline__ void raster_tile(int tiles_m, int tiles_n, int& tile_m, int& tile_n,
                                            int bid = static_cast<int>(blockIdx.x)) {
  const int per_group = GROUP_M * tiles_n;
  const int group = bid / per_group;
  const int first_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  tile_m = first_m + (bid % per_group) % group_rows;
  tile_n = (bid % per_group) / group_rows;
}

}  // namespace kgen
