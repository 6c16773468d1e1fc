// z = x * w^T through cuBLAS, for the cuBLAS-backed variants (the baseline the custom GEMMs are
// measured against). Uses PyTorch's handle, which is bound to the current stream and workspace,
// with the compute type fixed by the variant (KGEN_CUBLAS_COMPUTE) rather than by global flags
// such as torch.backends.cuda.matmul.allow_tf32.

namespace kgen_binding {

inline void cublas_gemm(const at::Tensor& x, const at::Tensor& w, at::Tensor& out) {
  const int M = static_cast<int>(x.size(0));
  const int K = static_cast<int>(x.size(1));
  const int N = static_cast<int>(w.size(0));
  if (M == 0 || N == 0) return;
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  // The handle's math mode could otherwise let CUBLAS_COMPUTE_32F use TF32; restore it after.
  cublasMath_t previous_mode;
  TORCH_CHECK(cublasGetMathMode(handle, &previous_mode) == CUBLAS_STATUS_SUCCESS, "cublasGetMathMode failed");
  TORCH_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode failed");
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major z[M][N] = x[M][K] w[N][K]^T is column-major z^T[N][M] = w^T^T x^T: op(w) = T.
  const cublasStatus_t status = cublasGemmEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data_ptr<float>(), CUDA_R_32F, K,
      x.data_ptr<float>(), CUDA_R_32F, K, &beta, out.data_ptr<float>(), CUDA_R_32F, N,
      KGEN_CUBLAS_COMPUTE, CUBLAS_GEMM_DEFAULT);
  cublasSetMathMode(handle, previous_mode);
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLAS GEMM failed: ", cublasGetStatusString(status));
}

}  // namespace kgen_binding
