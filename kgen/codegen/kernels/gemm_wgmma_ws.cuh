// kgen Hopper GEMM, warp-specialized (sm_90a only): z = x * w^T, x [M][K] and w [N][K] fp32
// row-major. TMA loads on mbarriers feed wgmma consumers; no CTA-wide barrier in the mainloop.
//
// Follows common.cuh, mma_detail.cuh and gemm_wgmma.cuh (concatenated before this file): it shares
// their epilogue, swizzle, tf32 helpers and wgmma wrappers, and WgmmaGemm is its fallback.
//
// Why: Nsight Compute put WgmmaGemm's largest stall on its per-k-tile __syncthreads (every
// thread issues cp.async copies and prepares B, so every k-tile needs the whole CTA to meet).
// Here each role waits only for the stage it needs:
//   * warpgroup 0, the producer (its registers are mostly idle):
//       warp 0, one thread: for each k-tile, waits until its stage is free (empty[s]), then
//         issues two TMA loads (A: BM x 32 of x, B: BN x 32 of w; the tensor-memory unit
//         writes them in the 128-byte swizzle that ldmatrix addressing and the wgmma
//         descriptors expect, and fills rows or k beyond the matrix with zeros) that complete
//         on full[s].
//       warps 1-3 (tf32x3 only): wait for full[s], write B's small part w - trunc_tf32(w) into
//         the stage's own small buffer as WgmmaGemm does, make the writes visible to the tensor
//         cores (fence.proxy.async) and arrive on ready[s]. tf32 reads w as it is (see
//         gemm_wgmma.cuh: rounding it first was a shared-memory round trip per k-tile).
//       tf32x3 on square tiles swaps the roles instead (x_as_b, below): w is A, split in the
//         consumers' registers, and x is B, its small part computed once per call over all of x
//         and copied by a third TMA load per stage; warps 1-3 idle. 3-8 % faster on
//         KernelBench's shapes (docs/perf.md, session 18).
//   * warpgroups 1..BM/64, the consumers: each owns 64 rows x BN of the tile and runs
//     WgmmaGemm's k-steps (tf32x3: A by ldmatrix and split in registers, B from shared memory;
//     tf32: A and B both from shared memory, a k-tile's four k-steps in one group) on
//     stage s once full[s] (and, tf32x3, ready[s]) have completed; once k-tile kt's first group
//     is issued, k-tile kt - 1's have completed, and every consumer warp arrives on empty[] for
//     its stage.
// The math (tf32x3 partial accumulators flushed every FLUSH k-tiles with the two warpgroups
// staggered) is WgmmaGemm's, see gemm_wgmma.cuh; tf32 here truncates x as well as w.
// Epilogue, after the last k-tile (WsEpilogue): the tile through shared memory for coalesced
// stores, the generated epilogue applied as it is stored, or, with kColStats, on the consumers'
// registers before the statistics (column_stats from the registers in fp32).
//
// Measured (H100, docs/perf.md; the standalone selftest tests/cuda/wgmma_selftest.cu, removed
// after 3e5e87a): tf32x3 128x128 s4 at 1024x8192x8192 in 1.09-1.11 ms against WgmmaGemm's
// 1.42-1.44 ms in the same run; a
// persistent form of this kernel (one CTA per SM, epilogue from registers) was no faster and
// is kept as docs/experiments/wgmma_ws_persistent.patch.
//
// TMA needs a 16-byte row pitch: K % 4 == 0 (and 16-byte aligned x and w, which the binding
// checks). Other K go to WgmmaGemm's scalar-load kernel (where ANY_K: the backward's GEMMs; a
// forward's K the C entry pads with zeros to a multiple of 8 instead: entry.cuh, gemm_k). A batch
// of at most 16 rows goes to gemm_skinny.cuh's kernel (mma.sync's 16-row tiles, w read once).
#pragma once
#include <cuda.h>  // CUtensorMap and its enums only: the encoder is found at run time, no -lcuda
#include <cuda_runtime.h>
#include <stdint.h>

namespace kgen {

namespace ws_detail {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces the bytes the TMA loads of this phase will deliver.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Returns once the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// A box of the 2-D tensor map at (k0, row0) into shared memory, completing on bar.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                         int k0, int row0) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(k0), "r"(row0)
      : "memory");
}

// The TMA pipeline of the warp-specialized 16-bit GEMMs (gemm_wgmma_half.cuh's, and
// gemm_wgmma_f16x3.cuh's two mainloops): STAGES stages from the dynamic shared memory's start,
// aligned to the 1024-byte swizzle atom, and after the stages' (or the epilogue's) buffer_bytes
// a full and an empty mbarrier per stage.
template <int STAGES>
struct TmaStages {
  static constexpr int kBarrierBytes = 2 * STAGES * 8;

  uint32_t smem;        // the aligned start, a shared address
  unsigned char* ptr;   // the same, a generic pointer
  uint32_t bars;

  __device__ __forceinline__ uint32_t full(int s) const { return bars + 8 * s; }              // TMA bytes landed
  __device__ __forceinline__ uint32_t empty(int s) const { return bars + 8 * (STAGES + s); }  // consumers done

  // `raw`: the kernel's extern __shared__ array. Thread 0 initializes the barriers (full: the
  // producer's one arrival, with the bytes; empty: one arrival per consumer warp), then the CTA
  // meets.
  __device__ static __forceinline__ TmaStages init(unsigned char* raw, int buffer_bytes, int consumer_warps) {
    const uint32_t smem_raw = mma_detail::smem_addr(raw);
    TmaStages t;
    t.smem = (smem_raw + 1023u) & ~1023u;
    t.ptr = raw + (t.smem - smem_raw);
    t.bars = t.smem + buffer_bytes;
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mbar_init(t.full(s), 1);
        mbar_init(t.empty(s), consumer_warps);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    return t;
  }

  // The producer thread: for each of k_tiles k-tiles, once its stage is free, `bytes` announced on
  // full[s] and loads(s, kt) issued (TMA loads completing on full(s)).
  template <class Loads>
  __device__ __forceinline__ void produce(int k_tiles, uint32_t bytes, Loads loads) const {
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      if (kt >= STAGES) mbar_wait(empty(s), ((kt / STAGES) - 1) & 1);
      mbar_arrive_expect_tx(full(s), bytes);
      loads(s, kt);
    }
  }
};

template <class Gemm, class EPI>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    wgmma_ws_kernel(const __grid_constant__ CUtensorMap map_x,
                    const __grid_constant__ CUtensorMap map_w,
                    const __grid_constant__ CUtensorMap map_x_small, int M, int N, int K,
                    EpilogueParams p, int splits, int x_as_b) {
  Gemm::template run<EPI>(&map_x, &map_w, &map_x_small, M, N, K, p, splits, x_as_b != 0);
}

// x's small part for tf32x3 with x as the shared-memory operand (WgmmaWsGemm::x_as_b): what the
// producer's preparation computes from a stage of w (wgmma_detail::small_part_b), once per call
// over all of x, so that TMA copies it into each stage beside x.
__global__ void tf32_small_part_kernel(const uint4* __restrict__ x, uint4* __restrict__ small,
                                       long long quads) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < quads;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    small[i] = wgmma_detail::small_part_b(x[i]);
  }
}

// Streaming multiprocessors of the current device (cached for the first 64 devices).
inline int sm_count() {
  static int counts[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 1;
  if (dev < 64 && counts[dev] > 0) return counts[dev];
  int n = 1;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) n = 1;
  if (dev < 64) counts[dev] = n;
  return n;
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's tensor-map encoder, looked up once through the runtime (so nothing links
// against libcuda); nullptr if the driver lacks it.
inline EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiled>(f)
                                                                : nullptr;
  }();
  return fn;
}

// Tensor map of a row-major [rows][K] matrix of `type` (elements of elem_bytes) read in boxes of
// box_rows rows x 128 bytes of k, 128-byte swizzled, zero-filled out of bounds. TMA needs a
// 16-byte row pitch: K * elem_bytes % 16 == 0.
inline cudaError_t make_kmajor_map(CUtensorMap* map, const void* g, CUtensorMapDataType type,
                                   int elem_bytes, int rows, int K, int box_rows) {
  const EncodeTiled encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t pitch[1] = {static_cast<cuuint64_t>(K) * elem_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / elem_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t step[2] = {1, 1};
  const CUresult r = encode(map, type, 2, const_cast<void*>(g), dims, pitch, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t make_kmajor_map(CUtensorMap* map, const float* g, int rows, int K, int box_rows) {
  return make_kmajor_map(map, g, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, rows, K, box_rows);
}

}  // namespace ws_detail

// The epilogue of the warp-specialized GEMMs (fp32 and 16-bit operands alike), after the last
// k-tile, by all kThreads threads, with each consumer warpgroup's 64 x BN fp32 accumulators in
// registers (the wgmma layout: acc[4j + e] at row lane / 4 (+8 for e >= 2) of the warp's 16,
// column 8j + 2 (lane % 4) + e % 2) and `tile` shared memory of at least kTileBytes and
// kStatsBytes that nothing else uses any more: the tile through shared memory for coalesced
// stores (tile_store; in the module's 16-bit dtype where EPI::Store says so: EpilogueStore), the
// generated epilogue applied as it is stored, or, where kColStats' column statistics are taken of
// its result, on the registers before them (column_stats from the registers, or
// tile_column_stats from the tile).
template <int BM, int BN>
struct WsEpilogue {
  static constexpr int kConsumers = BM / 64;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kAccRegs = BN / 2;
  static constexpr int kLdt = BN + 4;
  static constexpr int kTileBytes = BM * kLdt * 4;
  static constexpr int kStatsBytes = (4 * kConsumers + 1) * BN * 4;

  template <class EPI>
  __device__ static __forceinline__ void run(float (&acc)[kAccRegs], float* tile, int m0, int n0,
                                             int M, int N, const EpilogueParams& p) {
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wg = warp >> 2;
    // Without column statistics the generated epilogue runs as the tile is stored
    // (tile_epilogue), by all the CTA's threads, consecutive threads on consecutive columns: on
    // the registers each consumer thread waited on its per-column operands' loads one after
    // another, ~8 us a 128 x 256 tile of KernelBench 12 in bf16, over half its GEMM's fixed cost
    // (docs/perf.md, session 30). With statistics it runs on the registers, before them: an fp32
    // build's are of its result, S (EPI::kStatsOfStored), taken from the registers (column_stats);
    // a 16-bit build's of BatchNorm's input t as eager rounds it (EPI::stat, reading the parameters
    // of each column), from the tile (computing t in the consumers' registers as well made the
    // 128x256 bf16 kernel spill). (A pass on the tile before the statistics measured 3 % slower on
    // KernelBench 39 in bf16, 2048 tiles: session 30.)
    __syncthreads();
    if constexpr (EPI::kColStats) {
      if constexpr (!EPI::kIdentity) {
        if (wg > 0) {
          const int r = m0 + (wg - 1) * 64 + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int row = r + (e >= 2 ? 8 : 0);
              const int col = n0 + 8 * j + 2 * (lane & 3) + (e & 1);
              if (row < M && col < N) acc[4 * j + e] = EPI::apply(acc[4 * j + e], row, col, p);
            }
          }
        }
      }
      if constexpr (EPI::kStatsOfStored) {
        if (wg > 0) column_stats(acc, tile, m0, n0, M, N, p);
      }
    }
    __syncthreads();
    if (wg > 0) {
      const int r = (wg - 1) * 64 + (warp & 3) * 16 + (lane >> 2);
      const int c = 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        *reinterpret_cast<float2*>(&tile[r * kLdt + 8 * j + c]) =
            make_float2(acc[4 * j + 0], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(&tile[(r + 8) * kLdt + 8 * j + c]) =
            make_float2(acc[4 * j + 2], acc[4 * j + 3]);
      }
    }
    __syncthreads();
    if constexpr (EPI::kColStats) {
      if constexpr (!EPI::kStatsOfStored) {
        tile_column_stats<BM, BN, kThreads>(tile, kLdt, min(BM, M - m0), n0, N, m0 / BM, p.part_mean,
                                            p.part_m2, [&](float v, int n) { return EPI::stat(v, n, p); });
      }
      tile_store_for<BM, BN, kThreads, EPI>(tile, kLdt, m0, n0, M, N, p);
    } else {
      tile_epilogue<BM, BN, kThreads, EPI>(tile, kLdt, m0, n0, M, N, p);
    }
  }

  // The kColStats epilogue from the consumers' registers (what tile_column_stats computes from
  // shared memory, without the round trip): per column of the tile, the mean over its valid
  // rows, then the sum of squared deviations from it. Each sum runs over a thread's two rows,
  // the warp's 16 (shuffles across lane bits 2-4) and the consumer warps (shared memory).
  // Thread layout of acc: the wgmma accumulator, acc[4j + e] at row lane / 4 (+8 for e >= 2)
  // of the warp's 16, column 8j + 2 (lane % 4) + e % 2.
  __device__ static __forceinline__ void column_stats(const float (&acc)[kAccRegs], float* scratch,
                                                      int m0, int n0, int M, int N,
                                                      const EpilogueParams& p) {
    constexpr int kConsumerWarps = 4 * kConsumers;
    float* red = scratch;                          // [kConsumerWarps][BN]
    float* mean = scratch + kConsumerWarps * BN;   // [BN]
    const int ctid = threadIdx.x - 128;
    const int lane = ctid & 31;
    const int cw = ctid >> 5;
    const int rows = min(BM, M - m0);
    const int row = cw * 16 + (lane >> 2);
    const bool valid_lo = row < rows;
    const bool valid_hi = row + 8 < rows;
    auto consumers_sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers * 128) : "memory"); };
    // Sums of f(value, column) over the tile's valid rows, per consumer warp, into red.
    auto warp_column_sums = [&](auto f) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = 8 * j + 2 * (lane & 3) + e;
          float v = (valid_lo ? f(acc[4 * j + e], col) : 0.f) +
                    (valid_hi ? f(acc[4 * j + 2 + e], col) : 0.f);
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (lane < 4) red[cw * BN + col] = v;
        }
      }
      consumers_sync();
    };
    auto column_total = [&](int col) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) t += red[w * BN + col];
      return t;
    };
    warp_column_sums([](float v, int) { return v; });
    for (int col = ctid; col < BN; col += kConsumers * 128) {
      mean[col] = column_total(col) / static_cast<float>(rows);
    }
    consumers_sync();
    warp_column_sums([&](float v, int col) {
      const float d = v - mean[col];
      return d * d;
    });
    for (int col = ctid; col < BN; col += kConsumers * 128) {
      if (n0 + col < N) {
        const size_t at = static_cast<size_t>(m0 / BM) * N + n0 + col;
        p.part_mean[at] = mean[col];
        p.part_m2[at] = column_total(col);
      }
    }
  }
};

// Split-K where the output has too few tiles to fill the GPU (a small batch: 128 rows of an
// 8192-wide output are 64 tiles of 128 x 128 on 132 SMs): `splits` CTAs per tile, each summing
// a contiguous range of the k-tiles. Each writes its partial tile to the workspace, then counts
// itself in on the tile's counter; the CTA that arrives last adds the partials in the order of
// their k-ranges (so the result does not depend on which CTA finished when: bit-for-bit the
// same on every run) and runs the epilogue. No CTA waits for another, so no co-residency is
// assumed. Workspace: the counters (rounded up to 4 words), then [tile][split] partials, each
// laid out float4-major over the consumer threads (coalesced stores and loads).
template <int BM, int BN>
struct SplitK {
  static constexpr int kConsumerThreads = 128 * (BM / 64);
  static constexpr int kVecs = BN / 8;   // float4 per consumer thread (BN / 2 accumulators)
  // Each split sums at least this many k-tiles (and at most kMaxSplits splits per tile): a
  // partial tile costs a store and a load, worth it only over a long enough k-range.
  static constexpr int kMinKTiles = 16;
  static constexpr int kMaxSplits = 8;

  static int splits_for(long long tiles, int k_tiles) {
    if (tiles <= 0) return 1;
    long long s = ws_detail::sm_count() / tiles;
    s = std::min<long long>(s, k_tiles / kMinKTiles);
    s = std::min<long long>(s, kMaxSplits);
    return static_cast<int>(std::max<long long>(s, 1));
  }
  __host__ __device__ static long long counter_floats(long long tiles) { return (tiles + 3) / 4 * 4; }
  static long long floats(long long tiles, int splits) {
    return splits > 1 ? counter_floats(tiles) + tiles * splits * static_cast<long long>(BM) * BN : 0;
  }
  // A GEMM's k-splits per tile at this shape on the current GPU, over its k-tiles of BK k (1:
  // unsplit; where the GEMM cannot split at this K, `splits_k` false; at most SkinnyGemm's rows,
  // which run that kernel), and the workspace floats their partials and counters need (entry.cuh
  // adds them). The one rule of the Hopper GEMMs (WgmmaWsGemm, WgmmaWsF16x3Gemm, and the 16-bit
  // WgmmaWsHalfGemm); configs.k_splits is its Python copy for the fp32 GEMMs (the cost model ranks
  // fp32 variants), tied to it by tests/test_configs.py.
  template <int BK>
  static int splits_at(int M, int N, int K, bool splits_k) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!splits_k || K == 0 || M <= SkinnyGemm<float>::kMaxRows || !tile_grid<BM, BN>(M, N, K, tiles, e)) return 1;
    return splits_for(tiles, K / BK + (K % BK != 0));
  }
  template <int BK>
  static long long floats_at(int M, int N, int K, bool splits_k) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<BM, BN>(M, N, K, tiles, e)) return 0;
    return floats(tiles, splits_at<BK>(M, N, K, splits_k));
  }

  // Returns true in the CTA that holds the tile's whole sum in acc (and runs the epilogue).
  // is_last: a word of shared memory nothing else uses now (the drained pipeline's).
  __device__ static __forceinline__ bool combine(float (&acc)[BN / 2], float* region, int tile, int tiles,
                                                 int split, int splits, int& is_last) {
    unsigned int* counters = reinterpret_cast<unsigned int*>(region);
    float4* partials = reinterpret_cast<float4*>(region + counter_floats(tiles));
    const int ctid = static_cast<int>(threadIdx.x) - 128;   // consumers: warpgroups 1..
    auto slot = [&](int s) { return partials + (static_cast<size_t>(tile) * splits + s) * kVecs * kConsumerThreads; };
    if (ctid >= 0) {
      float4* mine = slot(split);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        mine[j * kConsumerThreads + ctid] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
      }
      __threadfence();   // the partial is visible before the counter says it is there
    }
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[tile], 1u) == static_cast<unsigned int>(splits - 1);
    __syncthreads();
    if (!is_last) return false;
    __threadfence();
    if (ctid >= 0) {
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        // Its own partial from acc, or at BN = 256 (the 16-bit GEMM's 128 accumulators per thread)
        // read back as stored, the same bits: picking it from acc there spilled 2 KB, and reading
        // it back in the fp16x3 GEMM spilled 12 bytes.
        float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int s = 0; s < splits; ++s) {
          const float4 v = BN <= 128 && s == split
                               ? make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3])
                               : __ldcg(slot(s) + j * kConsumerThreads + ctid);
          if (s == 0) {
            t = v;
          } else {
            t.x += v.x; t.y += v.y; t.z += v.z; t.w += v.w;
          }
        }
        acc[4 * j] = t.x; acc[4 * j + 1] = t.y; acc[4 * j + 2] = t.z; acc[4 * j + 3] = t.w;
      }
    }
    return true;
  }
};

// With the GEMM's roles swapped (w the A operand, x the B: WgmmaWsGemm::x_as_b, the fp16x3 GEMM's
// w in registers) each consumer holds z's tile transposed (its acc[4j + e] at row
// n0 + 64 cwg + 16 (warp % 4) + lane / 4 (+8 for e >= 2), column m0 + 8j + 2 (lane % 4) + e % 2):
// through shared memory `t` (BM x (BM + 4) floats: the drained pipeline's) into the layout the
// epilogue and split-K read. Square tiles. A 4-float pad per row keeps the writes free of bank
// conflicts.
template <int BM, int BN>
__device__ __forceinline__ void transpose_acc(float (&acc)[BN / 2], float* t) {
  static_assert(BM == BN, "the transposed tile is square");
  constexpr int kConsumers = BM / 64;
  constexpr int kLd = BM + 4;
  const int ctid = static_cast<int>(threadIdx.x) - 128;
  const int lane = ctid & 31;
  const int row = (ctid >> 5) * 16 + (lane >> 2);   // cwg * 64 + (warp % 4) * 16 + lane / 4
  const int col = 2 * (lane & 3);
  auto consumers_sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers * 128) : "memory"); };
  consumers_sync();   // every consumer's wgmmas have read their last stage
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) t[(8 * j + col + (e & 1)) * kLd + row + (e >= 2 ? 8 : 0)] = acc[4 * j + e];
  }
  consumers_sync();
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 v = *reinterpret_cast<const float2*>(&t[(row + 8 * h) * kLd + 8 * j + col]);
      acc[4 * j + 2 * h] = v.x;
      acc[4 * j + 2 * h + 1] = v.y;
    }
  }
}

// KGEN_WS_X_AS_B: tf32x3 with x as the shared-memory operand (WgmmaWsGemm::x_as_b), on by
// default; a file's source defining it 0 first runs the roles of sessions 1-17 (an A/B
// comparison: docs/experiments/s18/x_as_b_files.py writes the other way round).
#ifndef KGEN_WS_X_AS_B
#define KGEN_WS_X_AS_B 1
#endif

// ANY_K: K may be any value at run time (the backward's GEMMs, whose K is the batch); false in a
// forward GEMM, whose K off TMA's rows the C entry pads with zeros (entry.cuh, gemm_k)
// (the scalar kernel took 3x cuBLAS's time at 300 x 1337 -> 260; docs/perf.md, session 56): the
// fallback is then never launched and not compiled (with WgmmaGemm::launch's scalar kernel alone, KernelBench 33's file
// takes 3.6 s of nvcc instead of 4.3 s on a 2-core machine; docs/perf.md, session 10).
template <MathMode MATH, int BM, int BN, int STAGES, int FLUSH, int GROUP_M, bool ANY_K = true>
struct WgmmaWsGemm {
  static constexpr MathMode kMath = MATH;
  static constexpr int kTileM = BM;
  static constexpr int BK = 32;
  static constexpr int kConsumers = BM / 64;  // consumer warpgroups
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kPrepThreads = 96;  // producer warps 1-3
  static constexpr bool kSplit = MATH == MathMode::kTF32x3;
  static constexpr int kKSteps = BK / 8;
  static constexpr int kAccRegs = BN / 2;
  // Split-K at small M (SplitK): tiles up to 128 wide. At 256 (tf32) the partials' sum spills
  // the 128 accumulators a thread holds, so those tiles run unsplit.
  static constexpr bool kSplitsK = BN <= 128;

  static constexpr int kABytes = BM * BK * 4;
  static constexpr int kBBytes = BN * BK * 4;
  // A, B and (tf32x3) B's small part: every stage has its own, so nothing but empty[] orders
  // the producer's reuse of a stage.
  static constexpr int kStageBytes = kABytes + kBBytes + (kSplit ? kBBytes : 0);
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  static constexpr int kEpiBytes = WsEpilogue<BM, BN>::kTileBytes;
  static constexpr int kBarrierBytes = 3 * STAGES * 8;
  // + 1024: the dynamic shared memory is aligned up to the 1024-byte swizzle atom in-kernel.
  static constexpr int kSmemBytes =
      (kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes) + kBarrierBytes + 1024;

  // K % 4 != 0 (no TMA) and K == 0 (no tensor map) run here.
  using Fallback = WgmmaGemm<MATH, BM, BN, (STAGES > 4 ? STAGES : 4), FLUSH, GROUP_M>;

  static_assert(MATH == MathMode::kTF32x3 || MATH == MathMode::kTF32,
                "the wgmma GEMM implements the tf32x3 and tf32 math modes");
  static_assert(BM == 64 || BM == 128, "BM must be 64 or 128 (one or two consumer warpgroups)");
  static_assert(BN == 64 || BN == 128 || (BN == 256 && !kSplit),
                "BN must be 64 or 128, or 256 for tf32 (accumulators per thread)");
  static_assert(STAGES >= 2, "STAGES must be >= 2");
  static_assert(FLUSH >= 1, "FLUSH (k-tiles per partial accumulator) must be >= 1");
  static_assert(GROUP_M >= 1, "GROUP_M must be >= 1");
  static_assert(BN <= 256 && BM <= 256, "a TMA box has at most 256 rows");
  static_assert(WsEpilogue<BM, BN>::kStatsBytes <= (kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes),
                "column_stats' scratch must fit in the pipeline buffers");
  static_assert(kSmemBytes + kThreads * 4 <= 227 * 1024,
                "shared memory over the 227 KB per-CTA limit of sm_90");

  // The k-splits per tile at this shape (SplitK::splits_at; K % 4 != 0 runs the fallback,
  // unsplit), and the workspace floats they need.
  static int splits_for(int M, int N, int K) { return SplitK<BM, BN>::template splits_at<BK>(M, N, K, kSplitsK && K % 4 == 0); }
  static long long splitk_floats(int M, int N, int K) {
    return SplitK<BM, BN>::template floats_at<BK>(M, N, K, kSplitsK && K % 4 == 0);
  }

  // tf32x3 with the operands' roles swapped: w the operand read by ldmatrix and split in
  // registers, x the one the tensor cores read from shared memory, its small part computed once
  // per call into the workspace (tf32_small_part_kernel) and copied by TMA beside x. It spares
  // the mainloop the producer's preparation of w's small part in shared memory (a read and a
  // write of 16 KB per 128 x 32 k-tile, in a mainloop that shared memory's bandwidth bounds:
  // docs/perf.md, session 10), for one pass over x per call. Square tiles, so that the
  // accumulators (z's tile transposed) go back to z's layout through shared memory for the
  // epilogue; not where the split must keep infinities (its clamp is the register split's).
  static bool x_as_b(int M, int N, int K) {
    return KGEN_WS_X_AS_B && kSplit && BM == BN && !KGEN_SPLIT_KEEPS_INFINITIES && K % 4 == 0 &&
           K > 0 && M > SkinnyGemm<float>::kMaxRows;
  }
  static long long x_small_offset(int M, int N, int K) { return (splitk_floats(M, N, K) + 3) / 4 * 4; }
  // The GEMM's own workspace (entry.cuh places it last): split-K's partials, then x's small part.
  static long long split_floats(int M, int N, int K) {
    return x_as_b(M, N, K) ? x_small_offset(M, N, K) + static_cast<long long>(M) * K
                           : splitk_floats(M, N, K);
  }

  template <class EPI>
  static cudaError_t launch(const float* x, const float* w, int M, int N, int K,
                            const EpilogueParams& p, cudaStream_t stream) {
    unsigned tiles = 0;
    cudaError_t e;
    if (!tile_grid<BM, BN>(M, N, K, tiles, e)) return e;
    // A few rows: a stream over w on FMAs (gemm_skinny.cuh), not 64-row wgmma tiles.
    if (SkinnyGemm<float>::applies(x, w, M, N, K)) return SkinnyGemm<float>::template launch<EPI>(x, w, M, N, K, p, stream);
    if (K % 4 != 0 || K == 0) {
      if constexpr (ANY_K) {
        return Fallback::template launch<EPI>(x, w, M, N, K, p, stream);
      } else {
        return cudaErrorInvalidValue;   // built for the module's K, a multiple of 4
      }
    }
    // x and w are 16-byte aligned (the launch contract, as for the fallback's vec16 kernel);
    // the encoder refuses a pointer that is not, and that error is returned.
    CUtensorMap map_x, map_w, map_x_small;
    e = ws_detail::make_kmajor_map(&map_x, x, M, K, BM);
    if (e == cudaSuccess) e = ws_detail::make_kmajor_map(&map_w, w, N, K, BN);
    if (e != cudaSuccess) return e;
    // (The workspace is where the GEMM's own floats are: without one, the roles stay.)
    const bool swap = p.split_partials != nullptr && x_as_b(M, N, K);
    if (swap) {
      float* const x_small = p.split_partials + x_small_offset(M, N, K);
      const long long quads = static_cast<long long>(M) * K / 4;
      const int blocks = static_cast<int>(std::min<long long>((quads + 255) / 256, 8LL * ws_detail::sm_count()));
      ws_detail::tf32_small_part_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const uint4*>(x),
                                                         reinterpret_cast<uint4*>(x_small), quads);
      e = ws_detail::make_kmajor_map(&map_x_small, x_small, M, K, BM);
      if (e != cudaSuccess) return e;
    } else {
      map_x_small = map_x;   // not read
    }
    const auto kernel = ws_detail::wgmma_ws_kernel<WgmmaWsGemm, EPI>;
    e = allow_dynamic_smem<ws_detail::wgmma_ws_kernel<WgmmaWsGemm, EPI>>(kSmemBytes);
    if (e != cudaSuccess) return e;
    const int splits = p.split_partials != nullptr ? splits_for(M, N, K) : 1;
    if (splits > 1) {
      e = cudaMemsetAsync(p.split_partials, 0, tiles * sizeof(unsigned int), stream);
      if (e != cudaSuccess) return e;
    }
    kernel<<<tiles * splits, kThreads, kSmemBytes, stream>>>(map_x, map_w, map_x_small, M, N, K, p,
                                                             splits, swap ? 1 : 0);
    return cudaGetLastError();
  }

  // ---- device side (public only so the __global__ wrapper can call it) ----

  // WgmmaGemm::prepare_b over the producer's prep threads (tf32x3).
  __device__ static __forceinline__ void prepare_b(const float* b, float* small, int ptid) {
    for (int i = ptid; i < BN * BK / 4; i += kPrepThreads) {
      reinterpret_cast<uint4*>(small)[i] = wgmma_detail::small_part_b(reinterpret_cast<const uint4*>(b)[i]);
    }
  }

  __device__ static __forceinline__ void transpose_tile(float (&acc)[kAccRegs], float* t) {
    static_assert(BM * (BM + 4) * 4 <= kPipeBytes, "the transposed tile must fit in the pipeline buffers");
    transpose_acc<BM, BN>(acc, t);
  }

  template <class EPI>
  __device__ static __forceinline__ void run(const CUtensorMap* map_x, const CUtensorMap* map_w,
                                             const CUtensorMap* map_x_small, int M, int N, int K,
                                             const EpilogueParams& p, int splits, bool swap) {
    using Mma = wgmma_detail::WgmmaTf32<BN>;
    if constexpr (!(kSplit && BM == BN)) swap = false;
    extern __shared__ __align__(1024) unsigned char kgen_wgmma_ws_smem[];
    const uint32_t smem_raw = mma_detail::smem_addr(kgen_wgmma_ws_smem);
    const uint32_t smem = (smem_raw + 1023u) & ~1023u;
    unsigned char* const smem_ptr = kgen_wgmma_ws_smem + (smem - smem_raw);
    const uint32_t bars = smem + (kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes);
    auto full = [&](int s) { return bars + 8 * s; };                 // TMA bytes landed
    auto ready = [&](int s) { return bars + 8 * (STAGES + s); };     // B prepared
    auto empty = [&](int s) { return bars + 8 * (2 * STAGES + s); }; // consumers done
    auto a_stage = [&](int s) { return smem + s * kStageBytes; };
    auto b_stage = [&](int s) { return smem + s * kStageBytes + kABytes; };
    auto small_buf = [&](int s) { return smem + s * kStageBytes + kABytes + kBBytes; };
    auto generic = [&](uint32_t addr) { return reinterpret_cast<float*>(smem_ptr + (addr - smem)); };

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

    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        ws_detail::mbar_init(full(s), 1);
        ws_detail::mbar_init(ready(s), kPrepThreads);
        ws_detail::mbar_init(empty(s), 4 * kConsumers);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;

    if (wg == 0) {
      if (warp == 0) {
        if (lane == 0) {
          for (int kt = 0; kt < k_tiles; ++kt) {
            const int s = kt % STAGES;
            if (kt >= STAGES) ws_detail::mbar_wait(empty(s), ((kt / STAGES) - 1) & 1);
            const int k0 = (k_first + kt) * BK;
            if (swap) {
              // w's rows to the ldmatrix operand's place, x and its small part to B's.
              ws_detail::mbar_arrive_expect_tx(full(s), kABytes + 2 * kBBytes);
              ws_detail::tma_load(a_stage(s), map_w, full(s), k0, n0);
              ws_detail::tma_load(b_stage(s), map_x, full(s), k0, m0);
              ws_detail::tma_load(small_buf(s), map_x_small, full(s), k0, m0);
            } else {
              ws_detail::mbar_arrive_expect_tx(full(s), kABytes + kBBytes);
              ws_detail::tma_load(a_stage(s), map_x, full(s), k0, m0);
              ws_detail::tma_load(b_stage(s), map_w, full(s), k0, n0);
            }
          }
        }
        __syncwarp();
      } else if (kSplit && !swap) {
        const int ptid = tid - 32;
        for (int kt = 0; kt < k_tiles; ++kt) {
          const int s = kt % STAGES;
          ws_detail::mbar_wait(full(s), (kt / STAGES) & 1);
          prepare_b(generic(b_stage(s)), generic(small_buf(s)), ptid);
          wgmma_detail::fence_proxy_async();
          ws_detail::mbar_arrive(ready(s));
        }
      }
    } else {
      const int cwg = wg - 1;
      // ldmatrix addressing as in WgmmaGemm: lanes 0-15 rows 0-15 of the warp's slice at k 0-3
      // of the k-step, lanes 16-31 at k 4-7; the k-step's chunk is XOR-swizzled by row % 8.
      const int a_row = cwg * 64 + (warp & 3) * 16 + (lane & 15);
      const uint32_t a_lane = a_row * BK * 4;
      const uint32_t a_chunk =
          static_cast<uint32_t>((lane >> 4) ^ mma_detail::swizzle_key<BK>(a_row));
      float part[kAccRegs];  // kTF32x3 only; otherwise eliminated
      const int flush_offset = cwg * (FLUSH / 2);
      bool fresh = true;  // the next k-tile starts a new partial sum
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        const uint32_t parity = (kt / STAGES) & 1;
        ws_detail::mbar_wait(full(s), parity);
        if (kSplit && !swap) ws_detail::mbar_wait(ready(s), parity);
        const uint64_t b_desc = wgmma_detail::sw128_desc(b_stage(s));
        if constexpr (kSplit) {
          const uint32_t a_base = a_stage(s) + a_lane;
          const uint64_t s_desc = wgmma_detail::sw128_desc(small_buf(s));
#pragma unroll
          for (int ks = 0; ks < kKSteps; ++ks) {
            uint32_t raw[4], hi[4], lo[4];
            mma_detail::ldsm_x4(a_base + ((a_chunk ^ (2 * ks)) << 4), raw[0], raw[1], raw[2],
                                raw[3]);
            const uint64_t k_off = static_cast<uint64_t>(ks * 2);  // 32 bytes in 16-byte units
#pragma unroll
            for (int i = 0; i < 4; ++i) mma_detail::split_tf32(raw[i], hi[i], lo[i]);
            wgmma_detail::fence();
            Mma::mma(part, lo, b_desc + k_off, ks == 0 && fresh ? 0 : 1);
            Mma::mma(part, hi, s_desc + k_off, 1);
            Mma::mma(part, hi, b_desc + k_off, 1);
            wgmma_detail::commit();
            wgmma_detail::wait<1>();
            if (ks == 0 && kt > 0) {
              // Only this k-step's group may still run: k-tile kt - 1 is done with its stage.
              __syncwarp();
              if (lane == 0) ws_detail::mbar_arrive(empty((kt - 1) % STAGES));
            }
          }
        } else {
          // tf32: A read by the tensor cores from shared memory as B is (both truncated to tf32),
          // the k-tile's four k-steps in one group, as the 16-bit kernel does: no ldmatrix, no
          // rounding in registers, and no wait between k-steps.
          const uint64_t a_desc = wgmma_detail::sw128_desc(a_stage(s) + cwg * 64 * BK * 4);
          wgmma_detail::fence();
#pragma unroll
          for (int ks = 0; ks < kKSteps; ++ks) {
            const uint64_t k_off = static_cast<uint64_t>(ks * 2);
            Mma::mma(acc, a_desc + k_off, b_desc + k_off, 1);
          }
          wgmma_detail::commit();
          // Only this k-tile's group may still run: k-tile kt - 1 is done with its stage.
          wgmma_detail::wait<1>();
          if (kt > 0) {
            __syncwarp();
            if (lane == 0) ws_detail::mbar_arrive(empty((kt - 1) % STAGES));
          }
        }
        if constexpr (kSplit) {
          fresh = kt + 1 == k_tiles || (kt + flush_offset) % FLUSH == FLUSH - 1;
          if (fresh) {
            wgmma_detail::wait<0>();
            wgmma_detail::fence_regs(part);
#pragma unroll
            for (int i = 0; i < kAccRegs; ++i) acc[i] += part[i];
          }
        }
      }
      wgmma_detail::wait<0>();
      wgmma_detail::fence_regs(acc);
      if constexpr (kSplit && BM == BN) {
        if (swap) transpose_tile(acc, reinterpret_cast<float*>(smem_ptr));
      }
    }

    if constexpr (kSplitsK) {
      if (splits > 1 && !SplitK<BM, BN>::combine(acc, p.split_partials, tile, tiles, split, splits,
                                                 *reinterpret_cast<int*>(smem_ptr))) {
        return;
      }
    }
    // Every stage the producer filled has been consumed: the pipeline buffers are free for the
    // epilogue's scratch and tile.
    WsEpilogue<BM, BN>::template run<EPI>(acc, reinterpret_cast<float*>(smem_ptr), m0, n0, M, N, p);
  }

};

}  // namespace kgen
