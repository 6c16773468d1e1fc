// What the extension's C entry points of one GEMM part call (kgen_forward_<part> and
// kgen_workspace_floats_<part>, written by the template), from the emitted Python file through
// ctypes. Plain C types only: building an extension compiles no torch, ATen or pybind11 header
// (a pybind11 binding took ~30 of the ~40 s a candidate needed to build). ModelNew checks shapes,
// dtypes, devices and alignment before it calls; the entry points trust it and return the CUDA
// error text (nullptr on success). kgen_cfg::ForwardArgs and kgen_cfg::fill_operands are written
// by the template from the lists generator.py and lower.py make, the lists the Python side's
// ctypes signature and call come from too.
#pragma once

namespace kgen {

// Workspace layout: BatchNorm's partials and a, c (when the module has a BatchNorm), then S
// (where the output's buffer cannot hold it: forward.cuh, kSInOutput); with the matrix-vector rewrite,
// its column-sum partials, column sums and shift total instead; last, with a broadcast tail, the
// stages' output (the tail's core value, output_width(N) per row).
inline long long gemv_floats(int N, int K) {
  return (colsum_chunks(N) + 1) * static_cast<long long>(K) + 1;
}
inline long long stages_floats(int M, int N, int K) {
  // (A constant output that keeps torch's NaN: one word, kernels/constant.cuh's flag.)
  if (kgen_cfg::kConstantOutput) return kgen_cfg::ConstantReads::kAny ? 1 : 0;
  if (kgen_cfg::kGemv) return gemv_floats(N, K);
  const long long tiles = stats_tiles(M);
  const long long stats = kgen_cfg::kHasBatchNorm ? (2 * tiles + 2) * static_cast<long long>(N) : 0;
  return stats + (kSInOutput ? 0 : static_cast<long long>(M) * N);
}
inline long long core_floats(int M, int N) {
  return kgen_cfg::kHasTail ? static_cast<long long>(M) * kgen_cfg::output_width(N) : 0;
}
inline long long workspace_floats(int M, int N, int K) {
  return stages_floats(M, N, K) + core_floats(M, N);
}

// A part with a broadcast tail that keeps z for its backward keeps the core value too, after z
// and BatchNorm's per-column values (the tail's backward reads it: kernels/backward.cuh, tail_grad).
inline float* kept_core(float* z_out, int M, int N) {
  return z_out + static_cast<long long>(M) * N + static_cast<long long>(kgen_cfg::kKeptPerColumn) * N;
}

// The broadcast tail: the output's every element from the core value (struct Tail).
inline cudaError_t run_tail(const float* core, void* out, int M, const EpilogueParams& p, cudaStream_t stream) {
  const long long total = kgen_cfg::Tail::numel(M);
  const long long blocks = std::min<long long>((total + kTailThreads - 1) / kTailThreads, 65535LL * 8);
  if (total > 0 && M > 0) {
    tail_kernel<kgen_cfg::Tail><<<static_cast<int>(blocks), kTailThreads, 0, stream>>>(core, static_cast<float*>(out), total, M, p);
  }
  return cudaGetLastError();
}

// A point-wise part with backward kernels, in training: z kept into a.z_out (kernels/backward.cuh). A
// template, so that a part without them (kKeepsZ false: its GEMM may be cuBLAS's) instantiates
// none of it.
template <bool kKeepsZ>
const char* forward_keeping_z_entry(const kgen_cfg::ForwardArgs& a) {
  if constexpr (kKeepsZ) {
    EpilogueParams p{};
    FinalizeArgs f{};
    kgen_cfg::fill_operands(a, p, f);
    p.N = a.N;
    static_assert(!kKeepsZ || kgen_cfg::EvalStage2::kKind == 0, "a point-wise part: its epilogue makes the output");
    // With a broadcast tail the epilogue makes the core value (kept after z), the tail the output.
    const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    Output* const out = kgen_cfg::kHasTail ? reinterpret_cast<Output*>(kept_core(a.z_out, a.M, a.N)) : static_cast<Output*>(a.out);
    cudaError_t err = forward_keeping_z<kgen_cfg::Gemm, kgen_cfg::EvalEpilogue>(a.x, a.w, a.M, a.N, a.K, p, a.z_out, out, stream);
    if (err == cudaSuccess && kgen_cfg::kHasTail) err = run_tail(reinterpret_cast<float*>(out), a.out, a.M, p, stream);
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
  } else {
    return "this part keeps no z (it has no backward kernels)";
  }
}

// The z_out of a staged part (kernels/backward.cuh, backward_staged): z [M][N], then with
// BatchNorm its per-column a, c and (bn_saved) x̂'s coefficients and γ/σ: kKeptPerColumn
// (backward.KEPT_PER_COLUMN) floats per column, in this order.
static_assert(!kgen_cfg::kHasBatchNorm || kgen_cfg::kBackwardKind != kBackwardStaged || kgen_cfg::kKeptPerColumn == 5,
              "a, c, x̂'s two coefficients and γ/σ: five per column");

inline const char* forward_entry(const kgen_cfg::ForwardArgs& a) {
  if (a.z_out != nullptr && kgen_cfg::kBackwardKind == kBackwardPointwise) return forward_keeping_z_entry<kgen_cfg::kBackwardKind == kBackwardPointwise>(a);
  const long long tiles = stats_tiles(a.M);
  float* ws = a.workspace;
  const long long stats = kgen_cfg::kHasBatchNorm ? (2 * tiles + 2) * static_cast<long long>(a.N) : 0;
  Buffers b{};
  // With a broadcast tail the stages write its core value into the workspace (kept after z when
  // the backward will want it). (a.out's elements are Output: forward.cuh)
  b.out = !kgen_cfg::kHasTail ? static_cast<float*>(a.out)
          : a.z_out != nullptr ? kept_core(a.z_out, a.M, a.N) : ws + stages_floats(a.M, a.N, a.K);
  b.s = kSInOutput ? b.out : ws + stats;
  b.gemv = ws;
  if (kgen_cfg::kHasBatchNorm) {
    b.part_mean = ws;
    b.part_m2 = ws + tiles * a.N;
    b.col_a = ws + 2 * tiles * a.N;
    b.col_c = ws + (2 * tiles + 1) * a.N;
    if (a.z_out != nullptr) {
      b.col_a = a.z_out + static_cast<long long>(a.M) * a.N;
      b.col_c = b.col_a + a.N;
      b.bn_saved = b.col_a + 2 * a.N;
    }
  }
  EpilogueParams p{};
  FinalizeArgs f{};
  kgen_cfg::fill_operands(a, p, f);
#ifdef KGEN_CUBLAS_COMPUTE
  // (A constant output runs no GEMM, and its workspace has no room for z.)
  if (!kgen_cfg::kConstantOutput) {
    if (const char* err = kgen_api::cublas_gemm(a.x, a.w, b.s, a.M, a.N, a.K, a.stream)) return err;
  }
#endif
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  const char* err = forward_impl<kgen_cfg::Gemm>(a.x, a.w, a.M, a.N, a.K, a.training != 0, p, f, b, a.z_out, stream);
  if (err != nullptr || !kgen_cfg::kHasTail || a.M == 0) return err;
  const cudaError_t launched = run_tail(b.out, a.out, a.M, p, stream);
  return launched == cudaSuccess ? nullptr : cudaGetErrorString(launched);
}


// The backward entry's work (kgen_backward_<part>), by the part's kind of backward; with a broadcast
// tail, the tail's backward first (the stages' output gradient, after the backward's own workspace)
// and its operands' gradients last.
template <class B>
long long backward_workspace_floats(int M, int N, int K) {
  long long core;
  if constexpr (B::kKind == kBackwardPointwise) {
    core = backward_floats(M, N, K, B::kParams);
  } else {
    core = backward_staged_floats(M, N, K, B::kParams, B::Rows::kSlots, B::Rows::kPool);
  }
  return core + (kgen_cfg::kHasTail ? backward_segment(core_floats(M, N)) : 0);
}

template <class B>
BackwardStatus backward_stages(const float* x, const float* w, const float* g, const float* z, int M, int N, int K,
                               const EpilogueParams& p, float* workspace, float* dx, float* dw, float* grad_cols,
                               float* bn_grads, bool bn_training, bool need_dx, bool need_dw, cudaStream_t stream) {
  if constexpr (B::kKind == kBackwardPointwise) {
    (void)bn_grads; (void)bn_training;
    return backward_part<kgen_cfg::BackwardGemm, B>(x, w, g, z, M, N, K, p, workspace, dx, dw, grad_cols, need_dx, need_dw,
                                            stream);
  } else {
    return backward_staged<kgen_cfg::BackwardGemm, B>(x, w, g, kgen_cfg::output_width(N), z, M, N, K, p, workspace, dx, dw,
                                              grad_cols, bn_grads, bn_training, need_dx, need_dw, stream);
  }
}

// d_input: the gradient of the module's input read by a broadcast tail (nullptr: none wanted).
template <class B>
BackwardStatus backward_entry(const float* x, const float* w, const float* g, const float* z, int M, int N, int K,
                              const EpilogueParams& p, float* workspace, float* dx, float* dw, float* grad_cols,
                              float* bn_grads, bool bn_training, bool need_dx, bool need_dw, float* d_input,
                              cudaStream_t stream) {
  if constexpr (kgen_cfg::kHasTail) {
    using TB = kgen_cfg::TailBackward;
    if (M == 0) return {"", cudaSuccess};
    // The tail's backward reads the core value the forward kept after z.
    if (z == nullptr) return {"the forward kept no z (it ran without autograd)", cudaErrorInvalidValue};
    const float* t = kept_core(const_cast<float*>(z), M, N);
    float* g_core = workspace + (backward_workspace_floats<B>(M, N, K) - backward_segment(core_floats(M, N)));
    cudaError_t err = tail_grad<TB, 0>(t, g, g_core, M, p, false, stream);
    if (err != cudaSuccess) return {"the broadcast tail's gradient", err};
    const BackwardStatus status = backward_stages<B>(x, w, g_core, z, M, N, K, p, workspace, dx, dw, grad_cols, bn_grads,
                                                     bn_training, need_dx, need_dw, stream);
    if (status.error != cudaSuccess) return status;
    err = tail_operand_grads<TB>(t, g, grad_cols, d_input, M, N, p, stream);
    return {"the broadcast tail's operand gradients", err};
  } else {
    (void)d_input;
    return backward_stages<B>(x, w, g, z, M, N, K, p, workspace, dx, dw, grad_cols, bn_grads, bn_training, need_dx,
                              need_dw, stream);
  }
}

}  // namespace kgen
