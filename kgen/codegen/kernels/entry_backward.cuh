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
    // The GEMM's own memory, as forward_entry gives it: z goes to z_out, so nothing else of the
    // workspace is used here.
    gemm_memory(a, p);
    // KeepZEpilogue is the whole chain (the eval epilogue, or at fusion 0, whose eval epilogue
    // stops at the Linear's output for a point-wise kernel, the chain as fusion 1 fuses it): one
    // pass makes the output and keeps z. With a broadcast tail it makes the core value (kept
    // after z), the tail the output.
    const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    Output* const out = kgen_cfg::kHasTail ? reinterpret_cast<Output*>(kept_core(a.z_out, a.M, a.N)) : static_cast<Output*>(a.out);
    cudaError_t err = cudaSuccess;
    if constexpr (kgen_cfg::kPrologue) {
      // No GEMM: z is x (in fp32), and the whole chain a point-wise pass over it.
      err = prologue_keep_input(a.x, a.z_out, a.M, a.N, stream);
      if (err == cudaSuccess && a.M > 0 && a.N > 0) {
        pointwise_kernel<kgen_cfg::KeepZEpilogue, Output><<<pointwise_grid(a.z_out, out, a.M, a.N), kApplyThreads, 0, stream>>>(
            a.z_out, out, a.M, a.N, p);
        err = cudaGetLastError();
      }
    } else {
      err = forward_keeping_z<kgen_cfg::Gemm, kgen_cfg::KeepZEpilogue>(a.x, a.w, a.M, a.N, a.K, p, a.z_out, out, stream);
    }
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

// kgen_forward_<part> of a part with backward kernels: a point-wise part in training (z_out set)
// keeps z with forward_keeping_z_entry; every other call is forward_entry's (a staged part's
// forward_entry keeps z and BatchNorm's per-column values itself).
inline const char* forward_entry_with_backward(const kgen_cfg::ForwardArgs& a) {
  if (a.z_out != nullptr && kgen_cfg::kBackwardKind == kBackwardPointwise) return forward_keeping_z_entry<kgen_cfg::kBackwardKind == kBackwardPointwise>(a);
  return forward_entry(a);
}

// A 16-bit build's backward runs no GEMM of its own (torch's compute dx and dW in the module's
// dtype: model_new.py.j2): it instantiates none, and its workspace has no room for one.
// A prologue's neither (it has no GEMM): its kernels write dz, its dx, into dz_out in every build.
constexpr bool kBackwardGemms = std::is_same<Operand, float>::value && !kgen_cfg::kPrologue;
using BuildBackwardGemm = std::conditional_t<kBackwardGemms, kgen_cfg::BackwardGemm, NoBackwardGemm>;

// The backward entry's work (kgen_backward_<part>), by the part's kind of backward (the matrix-vector
// rewrite's: gemv_backward.cuh); with a broadcast
// tail, the tail's backward first (the stages' output gradient, after the backward's own workspace)
// and its operands' gradients last.
template <class B>
long long backward_workspace_floats(int M, int N, int K) {
  long long core;
  if constexpr (B::kKind == kBackwardPointwise) {
    core = backward_floats(M, N, K, B::kParams, kBackwardGemms);
  } else if constexpr (B::kKind == kBackwardGemv) {
    core = gemv_backward_floats(M, N, K);
  } else {
    core = backward_staged_floats(M, N, K, B::kParams, B::Rows::kSlots, B::Rows::kPool,
                                  B::Rows::kRuns && B::kHasBatchNorm, kBackwardGemms);
  }
  return core + (kgen_cfg::kHasTail ? backward_segment(core_floats(M, N)) : 0);
}

// In: x and w's element type, Grad: dx and dW's: float, but for the matrix-vector rewrite's backward,
// which reads and writes them in the module's dtype (generator.backward_args). G: g's (reads_typed_g),
// dz_out: dz in the module's dtype for torch's GEMMs, a 16-bit build's (nullptr: not wanted, or
// the fp32 build, whose own GEMMs read dz from the workspace).
template <class B, class In, class Grad, class G>
BackwardStatus backward_stages(const In* x, const In* w, const G* g, const float* z, int M, int N, int K,
                               const EpilogueParams& p, float* workspace, Grad* dx, Grad* dw, float* grad_cols,
                               float* bn_grads, Operand* dz_out, bool bn_training, bool need_dx, bool need_dw,
                               cudaStream_t stream) {
  if constexpr (B::kKind == kBackwardGemv) {
    // z: what the rewrite's forward kept (its rows' sums, forward.cuh's gemv_kept_w_sum).
    (void)bn_grads; (void)bn_training; (void)dz_out;
    return gemv_backward<kgen_cfg::GemvAffine, B>(x, w, g, z, z == nullptr ? nullptr : gemv_kept_w_sum(const_cast<float*>(z), M, N),
                                                  M, N, K, p, workspace, dx, dw, grad_cols, need_dx, need_dw, stream);
  } else if constexpr (B::kKind == kBackwardPointwise) {
    (void)bn_grads; (void)bn_training;
    return backward_part<BuildBackwardGemm, B>(x, w, g, z, M, N, K, p, workspace, dx, dw, grad_cols, dz_out, need_dx,
                                               need_dw, stream);
  } else {
    return backward_staged<BuildBackwardGemm, B>(x, w, g, kgen_cfg::output_width(N), z, M, N, K, p, workspace, dx, dw,
                                                 grad_cols, bn_grads, dz_out, bn_training, need_dx, need_dw, stream);
  }
}

// p.d_input: the gradients of the inputs read after the GEMM, by a broadcast tail or per element by the
// stages (one slot each; zeroed by the caller; nullptr: none wanted).
template <class B, class In, class Grad, class G>
BackwardStatus backward_entry(const In* x, const In* w, const G* g, const float* z, int M, int N, int K,
                              const EpilogueParams& p, float* workspace, Grad* dx, Grad* dw, float* grad_cols,
                              float* bn_grads, Operand* dz_out, bool bn_training, bool need_dx, bool need_dw,
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
                                                     dz_out, bn_training, need_dx, need_dw, stream);
    if (status.error != cudaSuccess) return status;
    err = tail_operand_grads<TB>(t, g, grad_cols, M, N, p, stream);
    return {"the broadcast tail's operand gradients", err};
  } else {
    return backward_stages<B>(x, w, g, z, M, N, K, p, workspace, dx, dw, grad_cols, bn_grads, dz_out, bn_training,
                              need_dx, need_dw, stream);
  }
}

// ---- the entry's own work: kgen_backward_<part> (kernel.cu.j2) calls backward_with_io -----------
//
// g and dz [M][N] (dz_out: what torch's GEMMs read, for a 16-bit module; nullptr: not wanted) are
// the caller's tensors in the operands' type, Operand, the column sums [rows][N] (the operands',
// then BatchNorm's dβ and dγ) in the parameters', Param (fp32 in the build for torch.autocast).
// An fp32 build's kernels work on them as they are. A 16-bit build's kernels read g and write dz
// in the module's dtype themselves (the point-wise kernel, the row kernel, BatchNorm's:
// kernels/backward.cuh), but a broadcast tail's and the matrix-vector rewrite's read an fp32 g
// (reads_typed_g): a copy after the kernels' own workspace (backward_io_floats), converted here in
// the stream's order, as the fp32 column sums are converted to 16-bit parameters' after them.
// (Each was a torch conversion before: a tensor op of host time on every step, docs/perf.md,
// session 40.) The column sums are zeroed here too (the kernels add into them; a torch.zeros was
// another such op).
template <class B>
constexpr bool reads_typed_g() {
  return !kgen_cfg::kHasTail && B::kKind != kBackwardGemv;
}

// The workspace's fp32 copy of g, where the kernels need one.
template <class B>
constexpr bool copies_g() {
  return !std::is_same<Operand, float>::value && !reads_typed_g<B>();
}

template <class B>
long long backward_io_floats(int M, int N, int K, long long g_numel, int rows) {
  return backward_workspace_floats<B>(M, N, K) + (copies_g<B>() ? backward_segment(g_numel) : 0) +
         (std::is_same<Param, float>::value ? 0 : backward_segment(static_cast<long long>(rows) * N));
}

// (G, P: Operand and Param, deduced, so that the branches for the other kinds of build are
// discarded unchecked.)
template <class B, class In, class Grad, class G, class P>
BackwardStatus backward_with_io(const In* x, const In* w, const G* g, long long g_numel, const float* z, int M,
                                int N, int K, const EpilogueParams& p, float* workspace, Grad* dx, Grad* dw,
                                P* grad_cols, int rows, G* dz_out, bool bn_training, bool need_dx,
                                bool need_dw, cudaStream_t stream) {
  static_assert(std::is_same<G, Operand>::value, "g and dz are in the operands' type");
  static_assert(std::is_same<P, Param>::value, "the column sums are in the parameters' type");
  const long long cols = static_cast<long long>(rows) * N;
  // The kernels' column sums: the caller's (fp32), or an fp32 copy after the workspace's g copy.
  float* cols32 = nullptr;
  if constexpr (std::is_same<P, float>::value) {
    cols32 = grad_cols;
  } else {
    cols32 = workspace + backward_workspace_floats<B>(M, N, K) + (copies_g<B>() ? backward_segment(g_numel) : 0);
  }
  cudaError_t err = cudaMemsetAsync(cols32, 0, sizeof(float) * cols, stream);
  if (err != cudaSuccess) return {"zeroing the column sums", err};
  float* const bn_grads = cols32 + static_cast<long long>(rows - 2) * N;
  BackwardStatus status{"", cudaSuccess};
  if constexpr (!copies_g<B>()) {
    (void)g_numel;
    status = backward_entry<B>(x, w, g, z, M, N, K, p, workspace, dx, dw, cols32, bn_grads, dz_out, bn_training,
                               need_dx, need_dw, stream);
  } else {
    float* g32 = workspace + backward_workspace_floats<B>(M, N, K);
    if ((err = convert(g, g32, g_numel, stream)) != cudaSuccess) return {"g to fp32", err};
    status = backward_entry<B>(x, w, static_cast<const float*>(g32), z, M, N, K, p, workspace, dx, dw, cols32, bn_grads,
                               dz_out, bn_training, need_dx, need_dw, stream);
  }
  if (status.error != cudaSuccess) return status;
  if constexpr (!std::is_same<P, float>::value) {
    if ((err = convert(cols32, grad_cols, cols, stream)) != cudaSuccess) return {"the column sums to the parameters' dtype", err};
  }
  return {"", cudaSuccess};
}

}  // namespace kgen
