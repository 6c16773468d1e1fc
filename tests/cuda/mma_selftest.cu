// Standalone correctness and speed check of kgen::MmaGemm (kgen/codegen/kernels/gemm_mma.cuh); what is
// checked and how: selftest_harness.cuh.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tests/cuda/mma_selftest.cu \
//        -o /tmp/mma_selftest && /tmp/mma_selftest [--quick]
#include "selftest_harness.cuh"

template <MathMode MATH, int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP_M>
static void mma_config(const Problem& P) {
  using G = kgen::MmaGemm<MATH, BM, BN, BK, WM, WN, STAGES, GROUP_M>;
  char cfg[96];
  std::snprintf(cfg, sizeof cfg, "%dx%dx%d w%dx%d s%d g%d (%d thr, %d KB)", BM, BN, BK, WM, WN,
                STAGES, GROUP_M, G::kThreads, G::kSmemBytes / 1024);
  run_config<G>(P, cfg);
}

static void run_all_configs(const Problem& P) {
  // tf32x3: 8 warps of 64x32 (the default pick), the same with 4 stages, 4 warps of 64x64 (two
  // CTAs per SM), 8 warps of 64x64 on a 128x256 tile, and a small tile for small problems.
  mma_config<MathMode::kTF32x3, 128, 128, 32, 64, 32, 3, 8>(P);
  mma_config<MathMode::kTF32x3, 128, 128, 32, 64, 32, 4, 8>(P);
  mma_config<MathMode::kTF32x3, 256, 64, 32, 64, 32, 3, 8>(P);
  mma_config<MathMode::kTF32x3, 128, 64, 32, 64, 32, 4, 8>(P);
  mma_config<MathMode::kTF32x3, 64, 64, 32, 32, 32, 4, 8>(P);
  // tf32x3 with round-to-nearest accumulation outside the tensor core (see gemm_mma.cuh).
  mma_config<MathMode::kTF32x3Rn, 128, 128, 32, 64, 32, 3, 8>(P);
  mma_config<MathMode::kTF32x3Rn, 128, 128, 32, 64, 32, 4, 8>(P);
  mma_config<MathMode::kTF32x3Rn, 64, 64, 32, 32, 32, 4, 8>(P);
  mma_config<MathMode::kTF32, 128, 128, 32, 64, 32, 3, 8>(P);
  mma_config<MathMode::kTF32, 128, 128, 32, 64, 64, 3, 8>(P);
  mma_config<MathMode::kTF32, 128, 256, 32, 64, 64, 3, 8>(P);
  mma_config<MathMode::kBF16, 128, 128, 32, 64, 32, 3, 8>(P);
  mma_config<MathMode::kBF16, 128, 128, 32, 64, 64, 3, 8>(P);
  mma_config<MathMode::kBF16, 128, 256, 32, 64, 64, 3, 8>(P);
}

int main(int argc, char** argv) {
  return selftest_main(argc, argv, run_all_configs,
                       zero_size_ok<kgen::MmaGemm<MathMode::kTF32x3, 128, 128, 32, 64, 32, 3, 8>>);
}
