// Shared harness of the standalone GEMM selftests (mma_selftest.cu, wgmma_selftest.cu): each
// defines its configurations and calls selftest_main().
//
// For every configuration and the shapes below, every epilogue runs on outputs poisoned with
// NaN and is compared with a double-precision GPU reference:
//   kStore     max |z - ref|
//   kAffine    max |z - (a*ref + c)|
//   kColStats  z as kStore, plus per-(m-tile, column) mean and M2 vs double over the same rows
// Tolerances are normwise, against S = max |ref|:
//   tf32x3, tf32x3rn  2 * (error of a plain fp32 GEMM, sequential fmaf over k) + 1e-6 * S
//   tf32    2e-3 * S          bf16  1e-2 * S
// The big shapes are also timed (kStore; 3 warm-ups, median of 20). --quick skips them.
// Exit status: 0 when every case passes, 1 otherwise, 2 on a CUDA error.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../kgen/codegen/kernels/common.cuh"
#include "../../kgen/codegen/kernels/mma_detail.cuh"
#include "../../kgen/codegen/kernels/gemm_mma.cuh"
#include "../../kgen/codegen/kernels/gemm_wgmma.cuh"
#include "../../kgen/codegen/kernels/gemm_wgmma_ws.cuh"

using kgen::Epi;
using kgen::EpilogueParams;
using kgen::MathMode;

#define CK(call)                                                                         \
  do {                                                                                   \
    const cudaError_t err_ = (call);                                                     \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
                   cudaGetErrorString(err_));                                            \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Device helpers

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Deterministic uniform [lo, hi) from (seed, index): independent of the launch shape.
__global__ void fill_uniform(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const unsigned long long h = mix64(mix64(seed) ^ i);
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

// Reference z = x * w^T. Acc = double: products exact, sums in double. Acc = float: the plain
// fp32 GEMM, one fmaf per k in ascending k order per output. 64x64 tile, 4x4 per thread.
template <typename Acc>
__global__ void __launch_bounds__(256) ref_gemm(const float* __restrict__ x,
                                                const float* __restrict__ w, Acc* __restrict__ z,
                                                int M, int N, int K) {
  __shared__ float xs[16][65];
  __shared__ float ws[16][65];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  Acc acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int r = i / 16, kk = i % 16, gk = k0 + kk;
      xs[kk][r] = (m0 + r < M && gk < K) ? x[static_cast<size_t>(m0 + r) * K + gk] : 0.f;
      ws[kk][r] = (n0 + r < N && gk < K) ? w[static_cast<size_t>(n0 + r) * K + gk] : 0.f;
    }
    __syncthreads();
    const int kmax = min(16, K - k0);
    for (int kk = 0; kk < kmax; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] = fma(Acc(xs[kk][ty + 16 * i]), Acc(ws[kk][tx + 16 * j]), acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) z[static_cast<size_t>(m) * N + n] = acc[i][j];
    }
}

__device__ __forceinline__ void atomic_max_nonneg(float* out, float v) {
  // Non-negative floats order like their bit patterns; NaN was mapped to +inf by the caller.
  atomicMax(reinterpret_cast<unsigned*>(out), __float_as_uint(v));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// max_i |got_i - want_i|, want = ref or a[n]*ref + c[n]; a NaN anywhere counts as +inf.
// got == nullptr: max_i |want_i|.
__global__ void max_err(const float* got, const double* ref, size_t count, int N,
                        const float* a, const float* c, float* out) {
  float m = 0.f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    double want = ref[i];
    if (a != nullptr) {
      const int n = static_cast<int>(i % N);
      want = static_cast<double>(a[n]) * want + static_cast<double>(c[n]);
    }
    const double d = got != nullptr ? fabs(static_cast<double>(got[i]) - want) : fabs(want);
    m = fmaxf(m, d <= 3.0e38 ? static_cast<float>(d) : INFINITY);
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) atomic_max_nonneg(out, m);
}

// Same for a float reference (the plain fp32 GEMM vs the double one).
__global__ void max_err_f32(const float* got, const double* ref, size_t count, float* out) {
  float m = 0.f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double d = fabs(static_cast<double>(got[i]) - ref[i]);
    m = fmaxf(m, d <= 3.0e38 ? static_cast<float>(d) : INFINITY);
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) atomic_max_nonneg(out, m);
}

// Per-(m-tile, column) statistics vs double over the same rows. Writes the worst ratio of error
// to tolerance for the mean (out[0]) and M2 (out[1]). Tolerances: tol_z per element; the
// epilogue's fp32 sums add rows * u * sum|.| at most.
__global__ void stats_err(const float* part_mean, const float* part_m2, const double* ref, int M,
                          int N, int BM, double tol_z, float* out) {
  const int tiles_m = (M + BM - 1) / BM;
  const long long total = static_cast<long long>(tiles_m) * N;
  float worst_mean = 0.f, worst_m2 = 0.f;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(idx / N), n = static_cast<int>(idx % N);
    const int r0 = t * BM, rows = min(BM, M - r0);
    double sum = 0, sum_abs = 0;
    for (int r = 0; r < rows; ++r) {
      const double v = ref[static_cast<size_t>(r0 + r) * N + n];
      sum += v;
      sum_abs += fabs(v);
    }
    const double mean = sum / rows;
    double m2 = 0;
    for (int r = 0; r < rows; ++r) {
      const double d = ref[static_cast<size_t>(r0 + r) * N + n] - mean;
      m2 += d * d;
    }
    const double u = 6.0e-8;
    const double tol_mean = tol_z + rows * u * (sum_abs / rows) + 1e-30;
    const double tol_m2 = 2.0 * tol_z * sqrt(rows * m2) +
                          rows * (tol_z + tol_mean) * (tol_z + tol_mean) + 2.0 * rows * u * m2 +
                          1e-30;
    const double e_mean = fabs(static_cast<double>(part_mean[idx]) - mean) / tol_mean;
    const double e_m2 = fabs(static_cast<double>(part_m2[idx]) - m2) / tol_m2;
    worst_mean = fmaxf(worst_mean, e_mean <= 3.0e38 ? static_cast<float>(e_mean) : INFINITY);
    worst_m2 = fmaxf(worst_m2, e_m2 <= 3.0e38 ? static_cast<float>(e_m2) : INFINITY);
  }
  worst_mean = warp_max(worst_mean);
  worst_m2 = warp_max(worst_m2);
  if ((threadIdx.x & 31) == 0) {
    atomic_max_nonneg(&out[0], worst_mean);
    atomic_max_nonneg(&out[1], worst_m2);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

static int g_failures = 0;
static int g_cases = 0;

struct Problem {
  int M, N, K;
  bool big;          // timed
  float* x;          // [M][K]
  float* w;          // [N][K]
  float* col_a;      // [N]
  float* col_c;      // [N]
  double* ref;       // [M][N] double reference
  double max_ref;    // S = max |ref|
  double err_fp32;   // max |plain fp32 GEMM - ref|
  double max_ref_affine;
};

static float* g_scalar = nullptr;  // device scratch for reductions (2 floats)

static void fill(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  if (n == 0) return;
  fill_uniform<<<1024, 256>>>(p, n, seed, lo, hi);
  CK(cudaGetLastError());
}

static double reduce_err(const float* got, const double* ref, size_t count, int N,
                         const float* a = nullptr, const float* c = nullptr) {
  CK(cudaMemset(g_scalar, 0, 2 * sizeof(float)));
  max_err<<<1024, 256>>>(got, ref, count, N, a, c, g_scalar);
  CK(cudaGetLastError());
  float h = 0;
  CK(cudaMemcpy(&h, g_scalar, sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

static Problem make_problem(int M, int N, int K, bool big) {
  Problem P{};
  P.M = M;
  P.N = N;
  P.K = K;
  P.big = big;
  const size_t mk = static_cast<size_t>(M) * K, nk = static_cast<size_t>(N) * K,
               mn = static_cast<size_t>(M) * N;
  CK(cudaMalloc(&P.x, mk * sizeof(float)));
  CK(cudaMalloc(&P.w, nk * sizeof(float)));
  CK(cudaMalloc(&P.col_a, N * sizeof(float)));
  CK(cudaMalloc(&P.col_c, N * sizeof(float)));
  CK(cudaMalloc(&P.ref, mn * sizeof(double)));
  const float ws = 1.0f / std::sqrt(static_cast<float>(K));
  fill(P.x, mk, 1000003ull * M + 17ull * K + 1, 0.f, 1.f);
  fill(P.w, nk, 1000033ull * N + 19ull * K + 2, -ws, ws);
  fill(P.col_a, N, 3, 0.5f, 1.5f);
  fill(P.col_c, N, 4, -1.f, 1.f);

  const dim3 grid((N + 63) / 64, (M + 63) / 64);
  ref_gemm<double><<<grid, 256>>>(P.x, P.w, P.ref, M, N, K);
  CK(cudaGetLastError());
  float* ref32 = nullptr;
  CK(cudaMalloc(&ref32, mn * sizeof(float)));
  ref_gemm<float><<<grid, 256>>>(P.x, P.w, ref32, M, N, K);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  P.max_ref = reduce_err(nullptr, P.ref, mn, N);
  P.max_ref_affine = reduce_err(nullptr, P.ref, mn, N, P.col_a, P.col_c);
  CK(cudaMemset(g_scalar, 0, 2 * sizeof(float)));
  max_err_f32<<<1024, 256>>>(ref32, P.ref, mn, g_scalar);
  CK(cudaGetLastError());
  float h = 0;
  CK(cudaMemcpy(&h, g_scalar, sizeof(float), cudaMemcpyDeviceToHost));
  P.err_fp32 = h;
  CK(cudaFree(ref32));
  std::printf("\n=== M=%d N=%d K=%d   max|ref|=%.4g   plain fp32 GEMM: max err %.3g (%.3g of max|ref|)\n",
              M, N, K, P.max_ref, P.err_fp32, P.err_fp32 / P.max_ref);
  return P;
}

static void free_problem(Problem& P) {
  CK(cudaFree(P.x));
  CK(cudaFree(P.w));
  CK(cudaFree(P.col_a));
  CK(cudaFree(P.col_c));
  CK(cudaFree(P.ref));
}

static const char* mode_name(MathMode m) {
  switch (m) {
    case MathMode::kTF32x3: return "tf32x3";
    case MathMode::kTF32x3Rn: return "tf32x3rn";
    case MathMode::kTF32: return "tf32";
    default: return "bf16";
  }
}
static const char* epi_name(Epi e) {
  return e == Epi::kStore ? "store" : e == Epi::kColStats ? "colstats" : "affine";
}

static double tolerance(MathMode m, const Problem& P) {
  switch (m) {
    case MathMode::kTF32x3:
    case MathMode::kTF32x3Rn: return 2.0 * P.err_fp32 + 1e-6 * P.max_ref;
    case MathMode::kTF32: return 2e-3 * P.max_ref;
    default: return 1e-2 * P.max_ref;
  }
}

template <class G>
static cudaError_t launch(Epi e, const Problem& P, const EpilogueParams& p, cudaStream_t s) {
  switch (e) {
    case Epi::kStore: return G::template launch<Epi::kStore>(P.x, P.w, P.M, P.N, P.K, p, s);
    case Epi::kColStats: return G::template launch<Epi::kColStats>(P.x, P.w, P.M, P.N, P.K, p, s);
    default: return G::template launch<Epi::kAffine>(P.x, P.w, P.M, P.N, P.K, p, s);
  }
}

constexpr int kGuard = 1024;  // floats past each output that must stay poisoned

static bool guard_intact(const float* dev_guard) {
  std::vector<unsigned> h(kGuard);
  CK(cudaMemcpy(h.data(), dev_guard, kGuard * sizeof(float), cudaMemcpyDeviceToHost));
  for (unsigned v : h)
    if (v != 0xffffffffu) return false;
  return true;
}

// One GEMM configuration G (MmaGemm or WgmmaGemm), described by cfg, on problem P: every
// epilogue, checked; the big shapes also timed.
template <class G>
static void run_config(const Problem& P, const char* cfg) {
  constexpr MathMode MATH = G::kMath;
  constexpr int BM = G::kTileM;
  const size_t mn = static_cast<size_t>(P.M) * P.N;
  const size_t parts = static_cast<size_t>((P.M + BM - 1) / BM) * P.N;
  float *z = nullptr, *pm = nullptr, *pm2 = nullptr;
  CK(cudaMalloc(&z, (mn + kGuard) * sizeof(float)));
  CK(cudaMalloc(&pm, (parts + kGuard) * sizeof(float)));
  CK(cudaMalloc(&pm2, (parts + kGuard) * sizeof(float)));
  EpilogueParams p{};
  p.z = z;
  p.part_mean = pm;
  p.part_m2 = pm2;
  p.col_a = P.col_a;
  p.col_c = P.col_c;
  const double tol = tolerance(MATH, P);

  for (Epi e : {Epi::kStore, Epi::kColStats, Epi::kAffine}) {
    ++g_cases;
    // 0xff bytes: every float is a NaN, so anything left unwritten fails the comparison.
    CK(cudaMemset(z, 0xff, (mn + kGuard) * sizeof(float)));
    CK(cudaMemset(pm, 0xff, (parts + kGuard) * sizeof(float)));
    CK(cudaMemset(pm2, 0xff, (parts + kGuard) * sizeof(float)));
    CK(launch<G>(e, P, p, 0));
    CK(cudaDeviceSynchronize());

    bool ok = true;
    const bool affine = e == Epi::kAffine;
    const double err = reduce_err(z, P.ref, mn, P.N, affine ? P.col_a : nullptr,
                                  affine ? P.col_c : nullptr);
    // The affine output's error scales with |a| <= 1.5, plus float rounding of a*z + c.
    const double tol_e = affine ? 1.5 * tol + 2.4e-7 * P.max_ref_affine : tol;
    ok &= err <= tol_e;
    ok &= guard_intact(z + mn);
    char extra[128] = "";
    if (e == Epi::kColStats) {
      CK(cudaMemset(g_scalar, 0, 2 * sizeof(float)));
      stats_err<<<1024, 256>>>(pm, pm2, P.ref, P.M, P.N, BM, tol, g_scalar);
      CK(cudaGetLastError());
      float h[2];
      CK(cudaMemcpy(h, g_scalar, sizeof h, cudaMemcpyDeviceToHost));
      ok &= h[0] <= 1.f && h[1] <= 1.f;
      ok &= guard_intact(pm + parts) && guard_intact(pm2 + parts);
      std::snprintf(extra, sizeof extra, "  mean err/tol %.3g, M2 err/tol %.3g", h[0], h[1]);
    }
    if ((MATH == MathMode::kTF32x3 || MATH == MathMode::kTF32x3Rn) && e == Epi::kStore) {
      std::snprintf(extra, sizeof extra, "  vs plain fp32: %.3gx",
                    P.err_fp32 > 0 ? err / P.err_fp32 : 0.0);
    }

    char timing[96] = "";
    if (P.big && e == Epi::kStore) {
      cudaEvent_t t0, t1;
      CK(cudaEventCreate(&t0));
      CK(cudaEventCreate(&t1));
      for (int i = 0; i < 3; ++i) CK(launch<G>(e, P, p, 0));
      std::vector<float> ms(20);
      for (float& t : ms) {
        CK(cudaEventRecord(t0));
        CK(launch<G>(e, P, p, 0));
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaEventElapsedTime(&t, t0, t1));
      }
      std::sort(ms.begin(), ms.end());
      const double med = 0.5 * (ms[9] + ms[10]);
      const double tflops = 2.0 * P.M * P.N * static_cast<double>(P.K) / (med * 1e-3) / 1e12;
      std::snprintf(timing, sizeof timing, "  %.3f ms  %.1f TFLOP/s", med, tflops);
      CK(cudaEventDestroy(t0));
      CK(cudaEventDestroy(t1));
    }

    if (!ok) ++g_failures;
    std::printf("%s %-8s %-40s %-8s err %.3g (tol %.3g, %.3g of max|ref|)%s%s\n",
                ok ? "PASS" : "FAIL", mode_name(MATH), cfg, epi_name(e), err, tol_e,
                err / P.max_ref, extra, timing);
    std::fflush(stdout);
  }
  CK(cudaFree(z));
  CK(cudaFree(pm));
  CK(cudaFree(pm2));
}

// Runs configs(P) on every shape (zero_size() first), prints a summary; the exit status.
template <class Configs, class ZeroSize>
static int selftest_main(int argc, char** argv, Configs configs, ZeroSize zero_size) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor);
  CK(cudaMalloc(&g_scalar, 2 * sizeof(float)));
  {
    ++g_cases;
    const bool ok = zero_size();
    CK(cudaDeviceSynchronize());
    if (!ok) ++g_failures;
    std::printf("%s zero-size M or N returns cudaSuccess\n", ok ? "PASS" : "FAIL");
  }
  struct Shape {
    int M, N, K;
    bool big;
  };
  const Shape shapes[] = {
      {1024, 8192, 8192, true}, {16384, 4096, 4096, true}, {1000, 1000, 1000, false},
      {7, 1000, 1000, false},   {2051, 300, 257, false},   {5, 3, 1, false},
      {129, 131, 68, false},  // N % 4 != 0 (scalar stores) with the 16-byte copy path
  };
  for (const Shape& s : shapes) {
    if (quick && s.big) continue;
    Problem P = make_problem(s.M, s.N, s.K, s.big);
    configs(P);
    free_problem(P);
  }
  CK(cudaFree(g_scalar));
  std::printf("\n%d passed, %d failed\n", g_cases - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}

// Both launch forms of a zero-size problem must launch nothing and succeed.
template <class G>
static bool zero_size_ok() {
  EpilogueParams p{};
  return G::template launch<Epi::kStore>(nullptr, nullptr, 0, 5, 7, p, 0) == cudaSuccess &&
         G::template launch<Epi::kColStats>(nullptr, nullptr, 5, 0, 7, p, 0) == cudaSuccess;
}
