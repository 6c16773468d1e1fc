// Standalone correctness and speed check of kgen::WgmmaGemm (kgen/codegen/kernels/gemm_wgmma.cuh); what
// is checked and how: selftest_harness.cuh. sm_90a only.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tests/cuda/wgmma_selftest.cu \
//        -o /tmp/wgmma_selftest && /tmp/wgmma_selftest [--quick]
//
// The best mma.sync tf32x3 configuration runs alongside, for a comparison within one run.
#include "selftest_harness.cuh"

template <MathMode MATH, int BM, int BN, int STAGES, int FLUSH, int GROUP_M>
static void wgmma_config(const Problem& P) {
  using G = kgen::WgmmaGemm<MATH, BM, BN, STAGES, FLUSH, GROUP_M>;
  char cfg[96];
  std::snprintf(cfg, sizeof cfg, "wgmma %dx%dx32 s%d f%d g%d (%d thr, %d KB)", BM, BN, STAGES,
                FLUSH, GROUP_M, G::kThreads, G::kSmemBytes / 1024);
  run_config<G>(P, cfg);
}

template <MathMode MATH, int BM, int BN, int STAGES, int FLUSH, int GROUP_M>
static void ws_config(const Problem& P) {
  using G = kgen::WgmmaWsGemm<MATH, BM, BN, STAGES, FLUSH, GROUP_M>;
  char cfg[96];
  std::snprintf(cfg, sizeof cfg, "wgmma-ws %dx%dx32 s%d f%d g%d (%d thr, %d KB)", BM, BN, STAGES,
                FLUSH, GROUP_M, G::kThreads, G::kSmemBytes / 1024);
  run_config<G>(P, cfg);
}

static void run_all_configs(const Problem& P) {
  using kgen::MmaGemm;
  run_config<MmaGemm<MathMode::kTF32x3, 128, 128, 64, 64, 32, 3, 8>>(P, "mma 128x128x64 w64x32 s3 g8");
  // tf32x3: flush interval (k-tiles of 32 per partial sum), stages, tile shapes.
  wgmma_config<MathMode::kTF32x3, 128, 128, 4, 1, 8>(P);
  wgmma_config<MathMode::kTF32x3, 128, 128, 5, 1, 8>(P);
  wgmma_config<MathMode::kTF32x3, 128, 128, 5, 2, 8>(P);
  wgmma_config<MathMode::kTF32x3, 128, 128, 5, 4, 8>(P);
  wgmma_config<MathMode::kTF32x3, 128, 128, 5, 8, 8>(P);
  wgmma_config<MathMode::kTF32x3, 128, 64, 6, 2, 8>(P);
  wgmma_config<MathMode::kTF32x3, 64, 128, 6, 2, 8>(P);
  wgmma_config<MathMode::kTF32x3, 64, 64, 8, 2, 8>(P);
  wgmma_config<MathMode::kTF32, 128, 128, 5, 1, 8>(P);
  wgmma_config<MathMode::kTF32, 128, 256, 4, 1, 8>(P);
  // Warp-specialized (TMA producer, mbarriers): gemm_wgmma_ws.cuh.
  ws_config<MathMode::kTF32x3, 128, 128, 4, 2, 8>(P);
  ws_config<MathMode::kTF32x3, 128, 128, 3, 2, 8>(P);
  ws_config<MathMode::kTF32x3, 128, 64, 6, 2, 8>(P);
  ws_config<MathMode::kTF32x3, 64, 128, 5, 2, 8>(P);
  ws_config<MathMode::kTF32, 128, 128, 6, 1, 8>(P);
  ws_config<MathMode::kTF32, 128, 256, 4, 1, 8>(P);
}

int main(int argc, char** argv) {
  return selftest_main(argc, argv, run_all_configs,
                       zero_size_ok<kgen::WgmmaGemm<MathMode::kTF32x3, 128, 128, 5, 2, 8>>);
}
