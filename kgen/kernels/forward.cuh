// The forward pass of one variant, in the order its fusion level dictates. Expects namespace
// kgen_cfg (written by the template) to define kProblem, Gemm, kGemmExternal and kFusedStats.
#pragma once
#include <algorithm>
#include <type_traits>

namespace kgen {

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

template <class Gemm, Epi EPI>
cudaError_t run_gemm(const float* x, const float* w, int M, int N, int K, const EpilogueParams& p,
                     cudaStream_t stream) {
  return Gemm::template launch<EPI>(x, w, M, N, K, p, stream);
}

}  // namespace kgen

namespace kgen_api {

int stats_rows_per_tile() {
  return kgen_cfg::kFusedStats ? kgen_cfg::kGemmTileM : kgen::kStatsTileRows;
}

// A template so that the branches discarded by `if constexpr` for this variant's Gemm (e.g. the
// kernel launches when the GEMM is external) are never instantiated.
template <class Gemm>
const char* forward_impl(const float* x, const float* w, float* out, int M, int N, int K,
                         bool training, const BnState& bn, const Workspace& ws, void* stream_ptr) {
  using namespace kgen;
  constexpr Problem P = kgen_cfg::kProblem;
  constexpr bool kAffineInGemm = !kgen_cfg::kGemmExternal && P == Problem::kGemmScaleBn;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t err = cudaSuccess;
  if (M == 0 || N == 0) return nullptr;

  FinalizeArgs f{};
  f.part_mean = ws.part_mean;
  f.part_m2 = ws.part_m2;
  f.rows_per_tile = stats_rows_per_tile();
  f.M = M;
  f.N = N;
  f.bias = bn.bias;
  f.scale = bn.scale;
  f.scale_stride = bn.scale_stride;
  f.gamma = bn.gamma;
  f.beta = bn.beta;
  f.running_mean = bn.running_mean;
  f.running_var = bn.running_var;
  f.num_batches_tracked = bn.num_batches_tracked;
  f.momentum = bn.momentum;
  f.cumulative = bn.cumulative;
  f.training = training;
  f.eps = bn.eps;
  f.col_a = ws.col_a;
  f.col_c = ws.col_c;
  constexpr int kFinalizeThreads = 256;
  auto finalize = [&]() {
    bn_finalize_kernel<P><<<div_up(N, kFinalizeThreads), kFinalizeThreads, 0, stream>>>(f);
    return cudaGetLastError();
  };

  EpilogueParams p{};
  p.z = out;
  p.part_mean = ws.part_mean;
  p.part_m2 = ws.part_m2;
  p.col_a = ws.col_a;
  p.col_c = ws.col_c;

  if (training) {
    if constexpr (kgen_cfg::kFusedStats) {
      err = run_gemm<Gemm, Epi::kColStats>(x, w, M, N, K, p, stream);
    } else {
      if constexpr (!kgen_cfg::kGemmExternal) err = run_gemm<Gemm, Epi::kStore>(x, w, M, N, K, p, stream);
      if (err == cudaSuccess) {
        dim3 grid(div_up(N, kStatsTileCols), div_up(M, kStatsTileRows));
        column_stats_kernel<<<grid, kStatsThreads, 0, stream>>>(out, M, N, ws.part_mean, ws.part_m2);
        err = cudaGetLastError();
      }
    }
    if (err == cudaSuccess) err = finalize();
  } else {
    // Eval: a, c come from the running statistics alone, so they are ready before the GEMM.
    err = finalize();
    if (err == cudaSuccess) {
      if constexpr (kAffineInGemm) {
        err = run_gemm<Gemm, Epi::kAffine>(x, w, M, N, K, p, stream);
        return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
      } else if constexpr (!kgen_cfg::kGemmExternal) {
        err = run_gemm<Gemm, Epi::kStore>(x, w, M, N, K, p, stream);
      }
    }
  }
  if (err != cudaSuccess) return cudaGetErrorString(err);

  if constexpr (P == Problem::kGemmScaleBn) {
    // Grid-stride loop: a few waves of CTAs cover any size.
    const size_t total = static_cast<size_t>(M) * N;
    const size_t items = N % 4 == 0 ? total / 4 : total;
    const int blocks = static_cast<int>(
        std::min<size_t>((items + kApplyThreads - 1) / kApplyThreads, kApplyMaxBlocks));
    bn_apply_kernel<<<blocks, kApplyThreads, 0, stream>>>(out, M, N, ws.col_a, ws.col_c);
  } else {
    const size_t row_bytes = static_cast<size_t>(N) * sizeof(float);
    if (row_bytes <= kSoftmaxRowCacheBytes) {
      if (row_bytes > 48 * 1024) {
        err = cudaFuncSetAttribute(softmax_rows_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(row_bytes));
        if (err != cudaSuccess) return cudaGetErrorString(err);
      }
      softmax_rows_kernel<true><<<M, kSoftmaxThreads, row_bytes, stream>>>(out, N, ws.col_a, ws.col_c);
    } else {
      softmax_rows_kernel<false><<<M, kSoftmaxThreads, 0, stream>>>(out, N, ws.col_a, ws.col_c);
    }
  }
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

const char* forward(const float* x, const float* w, float* out, int M, int N, int K,
                    bool training, const BnState& bn, const Workspace& ws, void* stream) {
  return forward_impl<kgen_cfg::Gemm>(x, w, out, M, N, K, training, bn, ws, stream);
}

}  // namespace kgen_api
