// z = x * w^T through cuBLAS, for the cuBLAS-backed variants (the baseline the custom GEMMs are
// measured against), in the forward and in the backward's two GEMMs (kgen::CublasGemm). The
// extension links no torch, so it cannot borrow PyTorch's cuBLAS handle: it keeps one handle per
// device, created on first use, and binds it to the caller's stream for each call. The compute
// type is the variant's (KGEN_CUBLAS_COMPUTE), never a global flag such as
// torch.backends.cuda.matmul.allow_tf32.
#pragma once
#include <cublas_v2.h>

namespace kgen_api {

inline const char* cublas_gemm(const float* x, const float* w, float* z, int M, int N, int K,
                               void* stream) {
  if (M == 0 || N == 0) return nullptr;
  constexpr int kMaxDevices = 64;
  static cublasHandle_t handles[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    return "cuBLAS GEMM: no usable current CUDA device";
  }
  cublasHandle_t& handle = handles[device];
  if (handle == nullptr) {
    const cublasStatus_t created = cublasCreate(&handle);
    if (created != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      return cublasGetStatusString(created);
    }
    // Default math: the compute type of each call alone decides whether TF32 is used.
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  }
  cublasStatus_t status = cublasSetStream(handle, static_cast<cudaStream_t>(stream));
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major z[M][N] = x[M][K] w[N][K]^T is column-major z^T[N][M] = w^T^T x^T: op(w) = T.
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, CUDA_R_32F, K, x,
                          CUDA_R_32F, K, &beta, z, CUDA_R_32F, N, KGEN_CUBLAS_COMPUTE,
                          CUBLAS_GEMM_DEFAULT);
  }
  return status == CUBLAS_STATUS_SUCCESS ? nullptr : cublasGetStatusString(status);
}

}  // namespace kgen_api

namespace kgen {

// The cuBLAS variants' GEMM as the backward kernels call a GEMM (Gemm::launch<StoreEpilogue>:
// z = a b^T stored as it is), in the variant's compute type: dx and dW in the tier's math.
// (The forward calls kgen_api::cublas_gemm from its entry point, the epilogue then a pass of
// its own: ExternalGemm.)
struct CublasGemm : ExternalGemm {
  template <class EPI>
  static cudaError_t launch(const float* a, const float* b, int M, int N, int K, const EpilogueParams& p,
                            cudaStream_t stream) {
    static_assert(std::is_same<EPI, StoreEpilogue>::value, "cuBLAS stores z as it is; an epilogue runs after it");
    // (cuBLAS's own status has no cudaError_t: the backward names the step that failed.)
    return kgen_api::cublas_gemm(a, b, p.z, M, N, K, stream) == nullptr ? cudaSuccess : cudaErrorUnknown;
  }
};

}  // namespace kgen
