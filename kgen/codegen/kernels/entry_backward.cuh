// The entry points of one GEMM part with backward kernels (kgen/lower/backward.py; the template
// inlines this file after entry.cuh in such a part's namespace only, and its kgen_forward_<part>
// calls forward_entry_with_backward, its kgen_backward_<part> backward_entry): the forward that
// keeps z for the backward, and the backward's workspace and work (kernels/backward.cuh).
#pragma once

namespace kgen {

// A point-wise part with backward kernels, in training: z kept into a.z_out (kernels/backward.cuh). A
// template, so that a staged part (kKeepsZ false) instantiates none of it.
template <bool kKeepsZ>
const char* forward_keeping_z_entry(const kgen_cfg::ForwardArgs& a) {
  if constexpr (kKeepsZ) {
    EpilogueParams p{};
    FinalizeArgs f{};
    kgen_cfg::fill_operands(a, p, f);
    p.N = a.N;
    static_assert(!kKeepsZ || (kgen_cfg::EvalStage2::kKind == 0 && !kgen_cfg::kHasTail), "a point-wise part: its epilogue makes the output");
    const cudaError_t err = forward_keeping_z<kgen_cfg::Gemm, kgen_cfg::EvalEpilogue>(
        a.x, a.w, a.M, a.N, a.K, p, a.z_out, static_cast<Output*>(a.out), static_cast<cudaStream_t>(a.stream));
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

// kgen_forward_<part> of a part with backward kernels: a point-wise part in training (z_out set)
// keeps z with forward_keeping_z_entry; every other call is forward_entry's (a staged part's
// forward_entry keeps z and BatchNorm's per-column values itself).
inline const char* forward_entry_with_backward(const kgen_cfg::ForwardArgs& a) {
  if (a.z_out != nullptr && kgen_cfg::kBackwardKind == kBackwardPointwise) return forward_keeping_z_entry<kgen_cfg::kBackwardKind == kBackwardPointwise>(a);
  return forward_entry(a);
}

// The backward entry's work (kgen_backward_<part>), by the part's kind of backward.
template <class B>
long long backward_workspace_floats(int M, int N, int K) {
  if constexpr (B::kKind == kBackwardPointwise) {
    return backward_floats(M, N, K, B::kParams);
  } else {
    return backward_staged_floats(M, N, K, B::kParams, B::Rows::kSlots, B::Rows::kPool);
  }
}

template <class B>
BackwardStatus backward_entry(const float* x, const float* w, const float* g, const float* z, int M, int N, int K,
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

}  // namespace kgen
