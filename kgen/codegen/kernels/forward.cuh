// The forward pass of one GEMM part of a module (one GEMM and its epilogue), in the order its
// stages dictate (kgen/lower/forward.py). The template places this file and entry.cuh inside a namespace
// of their own per part (kgen_part0, kgen_part1, ... for chained GEMMs), beside that part's
// namespace kgen_cfg, which defines Gemm, kGemmExternal, kFusedStats, kGemmTileM, kHasBatchNorm,
// kOutputIsTile, output_width, kGemv, kConstantOutput, kConstantValue and the generated structs
// TrainEpilogue, TrainStage2, EvalEpilogue, EvalStage2 (the same in both modes when there is no
// BatchNorm), BnInput, GemvAffine and GemvRows. The kernel library is ::kgen.
#pragma once

namespace kgen {
using namespace ::kgen;

// Shared memory one CTA of the variant's GEMM asks for on any of its paths (the warp-specialized
// wgmma GEMM has a fallback kernel), plus the epilogue's static per-thread scratch: checked
// against the target's limit from spec.ARCH_LIMITS, which the template writes as kMaxSmemBytes.
template <class G, class = void>
struct FallbackSmem : std::integral_constant<int, 0> {};
template <class G>
struct FallbackSmem<G, std::void_t<decltype(G::Fallback::kSmemBytes)>>
    : std::integral_constant<int, G::Fallback::kSmemBytes> {};
template <class G>
constexpr int cta_smem_bytes() {
  return (G::kSmemBytes > FallbackSmem<G>::value ? G::kSmemBytes : FallbackSmem<G>::value) +
         G::kThreads * 4;
}
static_assert(cta_smem_bytes<kgen_cfg::Gemm>() <= kgen_cfg::kMaxSmemBytes,
              "the GEMM tile needs more shared memory than the target allows (spec.ARCH_LIMITS)");

inline int div_up(int a, int b) { return (a + b - 1) / b; }

// The element type of what the stages write (Output), and of the part's output, which ModelNew
// allocates so (PartOutput: it asks kgen_output_is_operand_typed_<part>): the module's dtype
// (kgen_operand_t: float, or bf16 / fp16 in a 16-bit build), written by the kernel that computes
// it (stage 1's epilogue, the epilogue of a point-wise part that keeps z, stage 2's point-wise or
// row kernel, a broadcast tail's kernel), rounded to nearest even as torch's .to(dtype) rounds. The
// stages write fp32 where a constant fill or the matrix-vector rewrite makes the output (ModelNew
// converts it: the rewrite's M values; a constant's fill, which may be M x N), where a
// broadcast tail follows (its core value, in the workspace), and where the output is a value eager
// keeps in float32 (kgen_cfg::kFp32Value: the rows' sums of a sum of everything, which ModelNew
// sums and rounds once). Every output is fp32 with KGEN_FP32_OUTPUT defined (the emitted
// file's KGEN_FP32_OUTPUT=1: converted in Python, as before kgen 16-bit stores, kept for the test
// that compares the two).
#ifdef KGEN_FP32_OUTPUT
constexpr bool kFp32Output = true;
#else
constexpr bool kFp32Output = false;
#endif
constexpr bool kOutputOperandTyped = std::is_same<kgen_operand_t, float>::value ||
                                     (!kFp32Output && !kgen_cfg::kHasTail && !kgen_cfg::kConstantOutput && !kgen_cfg::kGemv &&
                                      !kgen_cfg::kFp32Value);
using Output = std::conditional_t<kOutputOperandTyped, kgen_operand_t, float>;
using PartOutput = std::conditional_t<kgen_cfg::kHasTail, std::conditional_t<kFp32Output, float, kgen_operand_t>, Output>;
static_assert(std::is_same<Output, float>::value || !kgen_cfg::kGemmExternal,
              "an external GEMM's epilogue runs in place on fp32 (its builds are fp32 only)");
// The part runs kgen's own GEMM (kgen_cfg::Gemm): not cuBLAS's, not the matrix-vector rewrite,
// not a constant output's fill.
constexpr bool kOwnGemm = !kgen_cfg::kGemmExternal && !kgen_cfg::kGemv && !kgen_cfg::kConstantOutput &&
                         !kgen_cfg::kPrologue;

static_assert(!kgen_cfg::kPrologue || (!kgen_cfg::kHasBatchNorm && !kgen_cfg::kHasTail),
              "a prologue has no BatchNorm and no tail (kgen/lower/forward.py, _check_prologue)");

// A prologue's z, for its backward: x itself in fp32 (the kernels' z is fp32 in every build). Templates,
// so that a part that is no prologue compiles no such kernel.
template <class T>
__global__ void prologue_keep_input_kernel(const T* __restrict__ x, float* __restrict__ z, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    z[i] = as_float(x[i]);
  }
}

template <class T>
cudaError_t prologue_keep_input(const T* x, float* z, int M, int N, cudaStream_t stream) {
  const long long n = static_cast<long long>(M) * N;
  if (n == 0) return cudaSuccess;
  const long long blocks = std::min<long long>((n + kApplyThreads - 1) / kApplyThreads, 65535LL * 8);
  prologue_keep_input_kernel<T><<<static_cast<int>(blocks), kApplyThreads, 0, stream>>>(x, z, n);
  return cudaGetLastError();
}

// Stage 1 stores S into the output's buffer where the output is (M, N) and S fits it (fp32), or
// where no stage 2 reads S in either mode (stage 1 then stores the output itself); elsewhere S
// has M x N floats of the workspace (entry.cuh, stages_floats).
constexpr bool kSInOutput =
    kgen_cfg::kOutputIsTile && (std::is_same<Output, float>::value ||
                                (kgen_cfg::TrainStage2::kKind == 0 && kgen_cfg::EvalStage2::kKind == 0));

// The element type of S for a mode's stage 2: a 16-bit build whose point-wise or row stage 2 reads
// a value the epilogue rounded to the module's dtype (Stage::kSModuleTyped) stores it in that
// dtype, the same bits in half the bytes, where the output is of that dtype too (16-byte vectors
// on both sides); fp32 elsewhere. (KernelBench's fusion-0 files in bf16: the GEMM writes, and stage
// 2 reads, half the bytes; docs/perf.md, session 29.)
template <class Stage>
using StageInput = std::conditional_t<Stage::kSModuleTyped && !std::is_same<kgen_operand_t, float>::value &&
                                          std::is_same<Output, kgen_operand_t>::value,
                                      kgen_operand_t, float>;

// Rows of S summarized by one BatchNorm partial (z_ready: the forward of a part that keeps z
// for its backward takes the statistics in a kernel of their own).
constexpr int stats_rows_per_tile(bool z_ready = false) {
  return kgen_cfg::kFusedStats && !kgen_cfg::kGemmExternal && !z_ready ? kgen_cfg::kGemmTileM : kStatsTileRows;
}
// BatchNorm partials the workspace has room for (the larger count of either way).
inline long long stats_tiles(int M) {
  const int rows = std::min(stats_rows_per_tile(false), stats_rows_per_tile(true));
  return (M + rows - 1) / rows;
}

struct Buffers {
  float* s;           // [M][N] stage 1's output S (in the module output's buffer: kSInOutput)
  float* out;         // the module output, of Output (or the core value a broadcast tail reads)
  float* part_mean;   // [tiles][N]
  float* part_m2;     // [tiles][N]
  float* col_a;       // [N]
  float* col_c;       // [N]
  float* col_at;      // [N] BatchNorm of t itself (EpilogueParams::col_at)
  float* col_ct;      // [N]
  float* gemv;        // the matrix-vector rewrite: [chunks][K] partials, [K] column sums, total
  float* bn_saved;    // [3][N] x̂'s coefficients and γ/σ for the backward (nullptr: not kept)
};

// Stage 1: z = x w^T and the epilogue Epi into S (and, when Epi::kColStats, the partials); where
// Stage (this mode's stage 2) is none, S is the output: into `out`, of Output.
// With an external GEMM, z is already in S and the epilogue is a point-wise pass over it.
// z_ready: z is already computed (kept for the backward): the epilogue as a point-wise pass (a
// staged part's; a point-wise part keeps z in its GEMM's epilogue, forward_impl).
template <class Gemm, class Epi, class Stage>
cudaError_t run_stage1(const kgen_operand_t* x, const kgen_weight_t* w, int M, int N, int K, EpilogueParams p,
                       const float* z_ready, float* out, cudaStream_t stream) {
  using Store = std::conditional_t<Stage::kKind == 0, Output, StageInput<Stage>>;
  if constexpr (Stage::kKind == 0) p.z = out;
  if constexpr (kgen_cfg::kBackwardKind != kBackwardPointwise) {
    if (z_ready != nullptr) {
      if (p.z == z_ready) return cudaSuccess;  // S is z itself (kept_as_s)
      Store* const s = reinterpret_cast<Store*>(p.z);
      pointwise_kernel<Epi, Store><<<pointwise_grid(z_ready, s, M, N), kApplyThreads, 0, stream>>>(z_ready, s, M, N, p);
      return cudaGetLastError();
    }
  }
  if constexpr (kgen_cfg::kGemmExternal) {
    if constexpr (!Epi::kIdentity) {
      pointwise_kernel<Epi><<<pointwise_grid(p.z, p.z, M, N), kApplyThreads, 0, stream>>>(p.z, p.z, M, N, p);
      return cudaGetLastError();
    }
    return cudaSuccess;
  } else {
    using Stored = std::conditional_t<std::is_same<Store, float>::value, Epi, StoringAs<Epi, Store>>;
    return Gemm::template launch<Stored>(x, w, M, N, K, p, stream);
  }
}

// With z kept (z_ready), stage 2 reads S straight from it when stage 1 stores z as it is (no copy).
template <class Epi, class Stage>
Buffers kept_as_s(const Buffers& b, float* z_ready, EpilogueParams& p) {
  Buffers out = b;
  if (z_ready != nullptr && Epi::kIdentity && Stage::kKind != 0 && std::is_same<StageInput<Stage>, float>::value) {
    out.s = z_ready;
    p.z = z_ready;
  }
  return out;
}

// The row kernel over M rows of N columns (stage 2 of kind 2), cached in shared memory where a
// row fits, with kAtTracedWidth: row_kernel's.
template <class Stage, bool kAtTracedWidth>
cudaError_t run_rows(const Buffers& b, Output* out, int M, int N, const EpilogueParams& p, cudaStream_t stream) {
  const int dst_stride = kgen_cfg::output_width(N);
  const int threads = Stage::kEagerSums ? kRowThreads : row_threads(N);
  using In = StageInput<Stage>;
  const In* const s = reinterpret_cast<const In*>(b.s);
  const size_t row_bytes = static_cast<size_t>(N) * sizeof(float);  // (the copy is fp32)
  if (row_bytes <= kRowCacheBytes) {
    const auto kernel = row_kernel<Stage, true, Output, kAtTracedWidth, In>;
    if (row_bytes > 48 * 1024) {
      const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_bytes));
      if (err != cudaSuccess) return err;
    }
    kernel<<<M, threads, row_bytes, stream>>>(s, out, N, dst_stride, p);
  } else {
    row_kernel<Stage, false, Output, kAtTracedWidth, In><<<M, threads, 0, stream>>>(s, out, N, dst_stride, p);
  }
  return cudaGetLastError();
}

// Stage 2: from S to the output (of Output).
template <class Stage>
cudaError_t run_stage2(const Buffers& b, int M, int N, const EpilogueParams& p, cudaStream_t stream) {
  Output* const out = reinterpret_cast<Output*>(b.out);
  if constexpr (Stage::kKind == 1) {
    const auto* const s = reinterpret_cast<const StageInput<Stage>*>(b.s);
    pointwise_kernel<Stage, Output><<<pointwise_grid(s, out, M, N), kApplyThreads, 0, stream>>>(s, out, M, N, p);
  } else if constexpr (Stage::kKind == 2) {
    // The row function has code for the traced width (a GroupNorm's group sizes as constants)
    // where Stage::kTracedWidth says so; any other N runs the general code.
    if constexpr (Stage::kTracedWidth > 0) {
      if (N == Stage::kTracedWidth) return run_rows<Stage, true>(b, out, M, N, p, stream);
    }
    return run_rows<Stage, false>(b, out, M, N, p, stream);
  }
  return cudaGetLastError();
}

// What a part of the matrix-vector rewrite keeps for its backward (z_out, kernels/gemv_backward.cuh;
// ModelNew's _kgen_kept sizes it): the rows' sums [M], a broadcast tail's core value (entry.cuh,
// kept_core), then, from the next multiple of 4 floats (gemv_rows_kernel reads them as float4),
// W's weighted column sums [K].
inline float* gemv_kept_w_sum(float* z_out, int M, int N) {
  const long long before = M + (kgen_cfg::kHasTail ? static_cast<long long>(M) * kgen_cfg::output_width(N) : 0);
  return z_out + (before + 3) / 4 * 4;
}

// A template so that the branches discarded by `if constexpr` for this variant (e.g. the kernel
// launches of a GEMM that is external) are never instantiated.
// z_ready: where to keep z for the backward (nullptr: not kept); the GEMM stores it there and
// the epilogue runs as a point-wise pass over it. Not for a point-wise part with backward kernels:
// its GEMM's epilogue keeps z beside the output (backward.cuh, forward_keeping_z, to which
// entry_backward.cuh sends such a call), so its builds leave out a GEMM that stores z alone here
// (in a 16-bit build, whose backward runs no GEMM of its own, that instantiation was the only one:
// ~3 s of 12's 11 s nvcc).
template <class Gemm>
const char* forward_impl(const kgen_operand_t* x, const kgen_weight_t* w, int M, int N, int K, bool training,
                         EpilogueParams p, FinalizeArgs f, const Buffers& b, float* z_ready, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  if (M == 0 || N == 0) return nullptr;
  if constexpr (kgen_cfg::kBackwardKind == kBackwardPointwise) {
    if (z_ready != nullptr) return "a point-wise part keeps z through forward_keeping_z";
  } else if constexpr (kgen_cfg::kPrologue) {
    // (z, for the backward, is x: converted to fp32 into z_ready)
    if (z_ready != nullptr) {
      err = prologue_keep_input(x, z_ready, M, N, stream);
      if (err != cudaSuccess) return cudaGetErrorString(err);
    }
  } else if constexpr (kOwnGemm) {
    if (z_ready != nullptr) {
      EpilogueParams store = p;
      store.z = z_ready;
      err = Gemm::template launch<StoreEpilogue>(x, w, M, N, K, store, stream);
      if (err != cudaSuccess) return cudaGetErrorString(err);
    }
  }
  p.z = b.s;
  p.N = N;
  p.part_mean = b.part_mean;
  p.part_m2 = b.part_m2;
  p.col_a = b.col_a;
  p.col_c = b.col_c;
  p.col_at = b.col_at;
  p.col_ct = b.col_ct;
  f.part_mean = b.part_mean;
  f.part_m2 = b.part_m2;
  f.rows_per_tile = stats_rows_per_tile(z_ready != nullptr);
  f.M = M;
  f.N = N;
  f.col_a = b.col_a;
  f.col_c = b.col_c;
  f.col_at = b.col_at;
  f.col_ct = b.col_ct;
  f.training = training;
  if (b.bn_saved != nullptr) {
    f.col_xa = b.bn_saved;
    f.col_xc = b.bn_saved + N;
    f.col_gi = b.bn_saved + 2 * N;
  }
  if constexpr (kgen_cfg::kConstantOutput) {
    // Rewrites made the output a constant (kgen/ir/rewrite.py): no GEMM.
    if constexpr (kgen_cfg::ConstantReads::kAny) {
      // torch's NaN kept: the constant where what the dropped chain reads is finite
      // (kernels/constant.cuh); the workspace's first word is its flag (entry.cuh).
      err = launch_constant_output<kgen_cfg::ConstantReads>(x, w, M, N, K, p, kgen_cfg::output_width(N),
                                                            kgen_cfg::kConstantValue,
                                                            reinterpret_cast<unsigned int*>(b.gemv), b.out, stream);
    } else {
      const long long total = static_cast<long long>(M) * kgen_cfg::output_width(N);
      fill_kernel<<<pointwise_blocks(M, kgen_cfg::output_width(N)), kApplyThreads, 0, stream>>>(
          b.out, total, kgen_cfg::kConstantValue);
      err = cudaGetLastError();
    }
  } else if constexpr (kgen_cfg::kPrologue) {
    // Ops on the module's input before its first GEMM: no GEMM and no stage 1; S is x (entry.cuh),
    // which stage 2, a point-wise or a row kernel, reads in its dtype (Stage::kSModuleTyped).
    (void)w; (void)K; (void)training; (void)f;
    if constexpr (!std::is_same<StageInput<kgen_cfg::EvalStage2>, kgen_operand_t>::value) {
      // (the build for torch.autocast writes fp32 outputs, and its stage 2 would read S so: ModelNew
      // refuses autocast for a module with a prologue before it gets here)
      return "a prologue reads x in its own dtype, which this build's stage 2 does not (torch.autocast)";
    } else {
      err = run_stage2<kgen_cfg::EvalStage2>(b, M, N, p, stream);
    }
  } else if constexpr (kgen_cfg::kGemv) {
    // No GEMM: the row sum as a matrix-vector product (kgen/ir/rewrite.py, row_sum_of_gemm; kernels/gemv.cuh).
    // x and w in the module's dtype; the output fp32 (Output), its values rounded to the dtype.
    // Kept for the backward (z_ready): the rows' sums and W's weighted column sums (gemv_kept).
    float* const sums = z_ready;
    float* const w_sum = z_ready != nullptr ? gemv_kept_w_sum(z_ready, M, N) : nullptr;
    err = launch_gemv<kgen_cfg::GemvAffine, kgen_cfg::GemvRows>(x, w, M, N, K, p, b.gemv, b.out, sums, w_sum, stream);
  } else {
    // A part without a BatchNorm runs the Eval structs in either mode (its Train ones are the
    // same code): `if constexpr`, so that its build instantiates neither the Train GEMM kernels
    // nor BatchNorm's.
    if constexpr (kgen_cfg::kHasBatchNorm) {
      auto finalize = [&]() {
        bn_finalize_kernel<kgen_cfg::BnInput><<<div_up(N, kFinalizeColumns), dim3(kFinalizeColumns, kFinalizeSplits), 0,
                                               stream>>>(f, p);
        return cudaGetLastError();
      };
      if (training) {
        const Buffers bt = kept_as_s<kgen_cfg::TrainEpilogue, kgen_cfg::TrainStage2>(b, z_ready, p);
        err = run_stage1<Gemm, kgen_cfg::TrainEpilogue, kgen_cfg::TrainStage2>(x, w, M, N, K, p, z_ready, b.out, stream);
        if (err == cudaSuccess && (!kgen_cfg::TrainEpilogue::kColStats || z_ready != nullptr)) {
          dim3 grid(div_up(N, kStatsTileCols), div_up(M, kStatsTileRows));
          column_stats_kernel<kgen_cfg::BnInput><<<grid, kStatsThreads, 0, stream>>>(bt.s, M, N, b.part_mean,
                                                                                    b.part_m2, p);
          err = cudaGetLastError();
        }
        if (err == cudaSuccess) err = finalize();
        if (err == cudaSuccess) err = run_stage2<kgen_cfg::TrainStage2>(bt, M, N, p, stream);
        return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
      }
      // Eval: BatchNorm's a, c come from the running statistics alone, ready before the GEMM.
      err = finalize();
    }
    const Buffers be = kept_as_s<kgen_cfg::EvalEpilogue, kgen_cfg::EvalStage2>(b, z_ready, p);
    if (err == cudaSuccess) err = run_stage1<Gemm, kgen_cfg::EvalEpilogue, kgen_cfg::EvalStage2>(x, w, M, N, K, p, z_ready, b.out, stream);
    if (err == cudaSuccess) err = run_stage2<kgen_cfg::EvalStage2>(be, M, N, p, stream);
  }
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace kgen
