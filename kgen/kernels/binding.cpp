// The torch-facing entry point. ModelNew.forward has already checked shapes, dtypes, devices
// and made x contiguous and 16-byte aligned; the TORCH_CHECKs here guard the raw-pointer
// boundary against a caller that skipped those checks.

namespace kgen_binding {

inline void check_param(const at::Tensor& t, const at::Tensor& x, int64_t numel, const char* what) {
  TORCH_CHECK(t.device() == x.device(), what, " is on ", t.device(), " but the input is on ", x.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), what, " must be contiguous");
  TORCH_CHECK(t.numel() == numel, what, " must have ", numel, " elements, got ", t.numel());
}

}  // namespace kgen_binding

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor scale,
                      torch::Tensor gamma, torch::Tensor beta,
                      c10::optional<torch::Tensor> running_mean,
                      c10::optional<torch::Tensor> running_var,
                      c10::optional<torch::Tensor> num_batches_tracked, bool training,
                      double momentum, bool cumulative, double eps) {
  using kgen_binding::check_param;
  TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shape mismatch: x ",
              x.sizes(), ", weight ", w.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "input must be contiguous float32");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "input must be 16-byte aligned");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(M < INT32_MAX && N < INT32_MAX && K < INT32_MAX, "sizes must fit in int32");
  check_param(w, x, N * K, "gemm.weight");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(w.data_ptr()) % 16 == 0, "gemm.weight must be 16-byte aligned");
  check_param(bias, x, N, "gemm.bias");
  TORCH_CHECK(scale.numel() == 1 || scale.numel() == N, "scale must have 1 or ", N, " elements");
  check_param(scale, x, scale.numel(), "scale");
  check_param(gamma, x, N, "bn.weight");
  check_param(beta, x, N, "bn.bias");
  const bool tracking = running_mean.has_value() && running_mean->defined();
  if (tracking) {
    check_param(*running_mean, x, N, "bn.running_mean");
    check_param(*running_var, x, N, "bn.running_var");
  } else {
    TORCH_CHECK(training, "eval mode needs running statistics");
  }
  if (cumulative) {
    TORCH_CHECK(num_batches_tracked.has_value() && num_batches_tracked->defined() &&
                    num_batches_tracked->scalar_type() == at::kLong,
                "momentum=None needs num_batches_tracked");
  }

  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty({M, N}, x.options());
  const int64_t stats_tiles = (M + kgen_api::stats_rows_per_tile() - 1) / kgen_api::stats_rows_per_tile();
  auto ws = torch::empty({(2 * stats_tiles + 2) * N}, x.options());
  float* ws_ptr = ws.data_ptr<float>();
  kgen_api::Workspace workspace{ws_ptr, ws_ptr + stats_tiles * N, ws_ptr + 2 * stats_tiles * N,
                                ws_ptr + (2 * stats_tiles + 1) * N};
  kgen_api::BnState state{};
  state.bias = bias.data_ptr<float>();
  state.scale = scale.data_ptr<float>();
  state.scale_stride = scale.numel() == 1 ? 0 : 1;
  state.gamma = gamma.data_ptr<float>();
  state.beta = beta.data_ptr<float>();
  state.running_mean = tracking ? running_mean->data_ptr<float>() : nullptr;
  state.running_var = tracking ? running_var->data_ptr<float>() : nullptr;
  state.num_batches_tracked =
      cumulative ? reinterpret_cast<const long long*>(num_batches_tracked->data_ptr<int64_t>()) : nullptr;
  state.momentum = static_cast<float>(momentum);
  state.cumulative = cumulative;
  state.eps = static_cast<float>(eps);

#ifdef KGEN_CUBLAS_COMPUTE
  kgen_binding::cublas_gemm(x, w, out);
#endif
  const char* err = kgen_api::forward(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(),
                                      static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                      training, state, workspace,
                                      at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == nullptr, "kgen kernel failed: ", err);
  return out;
}
