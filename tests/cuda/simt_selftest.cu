// Standalone correctness and speed check of kgen::SimtGemm (no torch, no cuBLAS).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tests/cuda/simt_selftest.cu
//        -o /tmp/simt_selftest
//   /tmp/simt_selftest          # all checks, then timings of the big shapes
//   /tmp/simt_selftest --quick  # skip the timings and the M=16384 shape
//
// Every config runs every shape with each epilogue against a double-precision GPU reference;
// outputs are poisoned with NaN first so unwritten elements fail. Exit status 1 on any failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../kgen/codegen/kernels/common.cuh"
#include "../../kgen/codegen/kernels/gemm_simt.cuh"

using kgen::Epi;
using kgen::EpilogueParams;

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_),      \
                   __FILE__, __LINE__, cudaGetErrorString(err_));                       \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

static constexpr double kCublasTflops = 51.0;  // cuBLAS SGEMM on H100 at the big shapes

// ------------------------------------------------------------------------------------------
// Device helpers

__device__ __forceinline__ uint32_t hash_u32(uint32_t v) {
  v ^= v >> 16;
  v *= 0x7feb352dU;
  v ^= v >> 15;
  v *= 0x846ca68bU;
  v ^= v >> 16;
  return v;
}

// Deterministic uniform values in [lo, hi).
__global__ void fill_uniform(float* p, size_t n, uint32_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = hash_u32(static_cast<uint32_t>(i) * 0x9e3779b9U ^ hash_u32(seed) ^
                                static_cast<uint32_t>(i >> 32));
    p[i] = lo + (hi - lo) * (static_cast<float>(h >> 8) * (1.0f / 16777216.0f));
  }
}

// Reference z = x * w^T in double, 16x16 shared-memory tiles.
__global__ void ref_gemm(const float* __restrict__ x, const float* __restrict__ w,
                         double* __restrict__ z, int M, int N, int K) {
  __shared__ double xs[16][17];
  __shared__ double ws[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * 16 + ty;
  const int n = blockIdx.x * 16 + tx;
  const int n_row = blockIdx.x * 16 + ty;  // row of w this thread stages
  double acc = 0.0;
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int k = k0 + tx;
    xs[ty][tx] = (m < M && k < K) ? static_cast<double>(x[static_cast<size_t>(m) * K + k]) : 0.0;
    ws[ty][tx] =
        (n_row < N && k < K) ? static_cast<double>(w[static_cast<size_t>(n_row) * K + k]) : 0.0;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc += xs[ty][kk] * ws[tx][kk];
    __syncthreads();
  }
  if (m < M && n < N) z[static_cast<size_t>(m) * N + n] = acc;
}

// Per (row tile of BM rows, column): mean and sum of squared deviations of the reference.
__global__ void ref_colstats(const double* __restrict__ z, int M, int N, int BM,
                             double* __restrict__ mean, double* __restrict__ m2) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (n >= N) return;
  const int r0 = t * BM;
  const int rows = min(BM, M - r0);
  double s = 0.0;
  for (int r = 0; r < rows; ++r) s += z[static_cast<size_t>(r0 + r) * N + n];
  const double mu = s / rows;
  double q = 0.0;
  for (int r = 0; r < rows; ++r) {
    const double d = z[static_cast<size_t>(r0 + r) * N + n] - mu;
    q += d * d;
  }
  mean[static_cast<size_t>(t) * N + n] = mu;
  m2[static_cast<size_t>(t) * N + n] = q;
}

struct ErrStats {
  unsigned long long max_err_bits;  // bit pattern of a non-negative double: orders like it
  unsigned long long bad;
};

__device__ __forceinline__ void record_err(ErrStats* s, double err, double tol) {
  const bool ok = err <= tol;  // false for NaN
  if (!ok) atomicAdd(&s->bad, 1ULL);
  const double e = (err == err) ? err : INFINITY;
  atomicMax(&s->max_err_bits, static_cast<unsigned long long>(__double_as_longlong(e)));
}

// got[m][n] against (a[n] * ref[m][n] + c[n]) (a, c null: plain ref).
__global__ void compare_z(const float* __restrict__ got, const double* __restrict__ ref,
                          size_t total, int N, const float* __restrict__ a,
                          const float* __restrict__ c, double tol, ErrStats* s) {
  double local_max = 0.0;
  unsigned long long local_bad = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    double expect = ref[i];
    double t = tol;
    if (a != nullptr) {
      const int n = static_cast<int>(i % N);
      expect = static_cast<double>(a[n]) * expect + static_cast<double>(c[n]);
      t = tol * fabs(static_cast<double>(a[n])) + 1e-6 * (1.0 + fabs(expect));
    }
    const double err = fabs(static_cast<double>(got[i]) - expect);
    if (!(err <= t)) ++local_bad;
    local_max = (err == err) ? fmax(local_max, err) : INFINITY;
  }
  if (local_bad) atomicAdd(&s->bad, local_bad);
  atomicMax(&s->max_err_bits, static_cast<unsigned long long>(__double_as_longlong(local_max)));
}

// Column statistics of a BM-row tile: the kernel sums fp32 z (each within tol_z of the
// reference), so the mean may be off by tol_z and M2 by about 2 * sqrt(rows * M2) * tol_z.
__global__ void compare_stats(const float* __restrict__ got_mean, const float* __restrict__ got_m2,
                              const double* __restrict__ ref_mean,
                              const double* __restrict__ ref_m2, int M, int N, int BM,
                              double tol_z, ErrStats* s_mean, ErrStats* s_m2) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (n >= N) return;
  const int rows = min(BM, M - t * BM);
  const size_t i = static_cast<size_t>(t) * N + n;
  const double mu = ref_mean[i], q = ref_m2[i];
  const double sd = sqrt(q / rows);
  const double tol_mean = tol_z + 1e-5 * (fabs(mu) + sd) + 1e-7;
  const double tol_m2 = 2.0 * sqrt(rows * q) * tol_z + rows * tol_z * tol_z + 1e-4 * q + 1e-7;
  record_err(s_mean, fabs(static_cast<double>(got_mean[i]) - mu), tol_mean);
  record_err(s_m2, fabs(static_cast<double>(got_m2[i]) - q), tol_m2);
}

// ------------------------------------------------------------------------------------------
// Host side

struct Shape {
  int M, N, K;
  bool timed;
};

struct Buffers {
  float *x = nullptr, *w = nullptr, *z = nullptr, *a = nullptr, *c = nullptr;
  float *part_mean = nullptr, *part_m2 = nullptr;
  double *ref = nullptr, *ref_mean = nullptr, *ref_m2 = nullptr;
  ErrStats* stats = nullptr;  // [3]
};

static int g_failures = 0;
static int g_cases = 0;

static int div_up(int a, int b) { return (a + b - 1) / b; }

static void fill(float* p, size_t n, uint32_t seed, float lo, float hi) {
  fill_uniform<<<1024, 256>>>(p, n, seed, lo, hi);
  CHECK(cudaGetLastError());
}

static void poison(void* p, size_t bytes) { CHECK(cudaMemset(p, 0xFF, bytes)); }  // NaN

static double bits_to_double(unsigned long long b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

static void report(const char* cfg, const Shape& s, const char* epi, const char* what,
                   const ErrStats& e, double tol) {
  ++g_cases;
  const bool ok = e.bad == 0;
  if (!ok) ++g_failures;
  std::printf("%s %-34s M=%-5d N=%-5d K=%-5d %-9s %-5s max_err=%.3e tol=%.3e bad=%llu\n",
              ok ? "PASS" : "FAIL", cfg, s.M, s.N, s.K, epi, what,
              bits_to_double(e.max_err_bits), tol, e.bad);
}

// fp32 accumulation of K products of values in [-1, 1): a few K * 2^-24 in the worst case met
// in practice; real bugs (a lost k-step, garbage padding) give errors of order 0.1-1.
static double z_tolerance(int K) { return 2e-6 * K + 1e-5; }

template <class G>
static const char* launch_epi(Epi epi, const Buffers& b, const Shape& s,
                              const EpilogueParams& p) {
  cudaError_t err = cudaSuccess;
  switch (epi) {
    case Epi::kStore:
      err = G::template launch<Epi::kStore>(b.x, b.w, s.M, s.N, s.K, p, 0);
      break;
    case Epi::kColStats:
      err = G::template launch<Epi::kColStats>(b.x, b.w, s.M, s.N, s.K, p, 0);
      break;
    case Epi::kAffine:
      err = G::template launch<Epi::kAffine>(b.x, b.w, s.M, s.N, s.K, p, 0);
      break;
  }
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

static const char* epi_name(Epi e) {
  return e == Epi::kStore ? "kStore" : e == Epi::kColStats ? "kColStats" : "kAffine";
}

template <class G>
static void check_config(const char* cfg, const Shape& s, const Buffers& b) {
  const size_t total = static_cast<size_t>(s.M) * s.N;
  const int tiles_m = div_up(s.M, G::kTileM);
  const size_t part = static_cast<size_t>(tiles_m) * s.N;
  const double tol = z_tolerance(s.K);
  EpilogueParams p{};
  p.z = b.z;
  p.part_mean = b.part_mean;
  p.part_m2 = b.part_m2;
  p.col_a = b.a;
  p.col_c = b.c;

  // Reference statistics for this config's row tiling.
  ref_colstats<<<dim3(div_up(s.N, 128), tiles_m), 128>>>(b.ref, s.M, s.N, G::kTileM, b.ref_mean,
                                                          b.ref_m2);
  CHECK(cudaGetLastError());

  for (Epi epi : {Epi::kStore, Epi::kColStats, Epi::kAffine}) {
    poison(b.z, total * sizeof(float));
    poison(b.part_mean, part * sizeof(float));
    poison(b.part_m2, part * sizeof(float));
    CHECK(cudaMemset(b.stats, 0, 3 * sizeof(ErrStats)));
    CHECK(cudaDeviceSynchronize());
    if (const char* e = launch_epi<G>(epi, b, s, p)) {
      ++g_cases;
      ++g_failures;
      std::printf("FAIL %-34s M=%-5d N=%-5d K=%-5d %-9s launch: %s\n", cfg, s.M, s.N, s.K,
                  epi_name(epi), e);
      continue;
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    const bool affine = epi == Epi::kAffine;
    compare_z<<<1024, 256>>>(b.z, b.ref, total, s.N, affine ? b.a : nullptr,
                             affine ? b.c : nullptr, tol, &b.stats[0]);
    CHECK(cudaGetLastError());
    if (epi == Epi::kColStats) {
      compare_stats<<<dim3(div_up(s.N, 128), tiles_m), 128>>>(
          b.part_mean, b.part_m2, b.ref_mean, b.ref_m2, s.M, s.N, G::kTileM, tol, &b.stats[1],
          &b.stats[2]);
      CHECK(cudaGetLastError());
    }
    ErrStats st[3];
    CHECK(cudaMemcpy(st, b.stats, sizeof st, cudaMemcpyDeviceToHost));
    report(cfg, s, epi_name(epi), "z", st[0], tol);
    if (epi == Epi::kColStats) {
      report(cfg, s, epi_name(epi), "mean", st[1], tol);
      report(cfg, s, epi_name(epi), "M2", st[2], tol);
    }
  }
}

template <class G>
static void time_one(const char* cfg, const Shape& s, int K, Epi epi, const char* label,
                     const Buffers& b, cudaEvent_t start, cudaEvent_t stop) {
  EpilogueParams p{};
  p.z = b.z;
  p.part_mean = b.part_mean;
  p.part_m2 = b.part_m2;
  p.col_a = b.a;
  p.col_c = b.c;
  const Shape t{s.M, s.N, K, true};
  for (int i = 0; i < 3; ++i) {
    if (const char* e = launch_epi<G>(epi, b, t, p)) {
      std::printf("FAIL %s timing launch: %s\n", cfg, e);
      ++g_failures;
      return;
    }
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(start));
    launch_epi<G>(epi, b, t, p);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float elapsed = 0.f;
    CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  const double med = 0.5 * (ms[9] + ms[10]);
  const double tflops = 2.0 * t.M * t.N * static_cast<double>(t.K) / (med * 1e-3) / 1e12;
  std::printf("TIME %-34s M=%-5d N=%-5d K=%-5d %-15s median %.3f ms  %.2f TFLOP/s  (%.0f%% of "
              "cuBLAS %.0f)\n",
              cfg, t.M, t.N, t.K, label, med, tflops, 100.0 * tflops / kCublasTflops,
              kCublasTflops);
}

template <class G>
static void time_config(const char* cfg, const Shape& s, const Buffers& b) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  time_one<G>(cfg, s, s.K, Epi::kStore, "kStore", b, start, stop);
  time_one<G>(cfg, s, s.K, Epi::kColStats, "kColStats", b, start, stop);
  // K - 1 on the same buffers (rows just overlap differently): the scalar-load fallback.
  time_one<G>(cfg, s, s.K - 1, Epi::kStore, "kStore scalar", b, start, stop);
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
}

template <class G>
static void describe(const char* cfg) {
  // The kernels launch() instantiates are those of the base SimtGemm, not of Cfg.
  using Base = typename G::Base;
  cudaFuncAttributes vec{}, scalar{};
  auto kernel = kgen::simt_gemm_kernel<Base, true, Epi::kColStats>;
  CHECK(cudaFuncGetAttributes(&vec, kernel));
  CHECK(cudaFuncGetAttributes(&scalar, kgen::simt_gemm_kernel<Base, false, Epi::kColStats>));
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             G::kSmemBytes));
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, G::kThreads,
                                                      G::kSmemBytes));
  std::printf("CONFIG %-34s threads=%d smem=%d B regs(vec/scalar)=%d/%d local=%zu/%zu B "
              "CTAs/SM=%d\n",
              cfg, G::kThreads, G::kSmemBytes, vec.numRegs, scalar.numRegs,
              vec.localSizeBytes, scalar.localSizeBytes, blocks);
}

// Exposes BM to the test without widening SimtGemm's interface.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int GROUP_M>
struct Cfg : kgen::SimtGemm<BM, BN, BK, WM, WN, TM, TN, GROUP_M> {
  using Base = kgen::SimtGemm<BM, BN, BK, WM, WN, TM, TN, GROUP_M>;
  static constexpr int kTileM = BM;
};

template <class G>
struct Named {
  using Gemm = G;
  const char* name;
};

template <class F>
static void for_each_config(F&& f) {
  // 256 threads, 8x8 per thread, 2 CTAs/SM: the classic SIMT SGEMM shape.
  f(Named<Cfg<128, 128, 8, 32, 64, 8, 8, 8>>{"128x128x8 w32x64 t8x8"});
  f(Named<Cfg<128, 128, 8, 64, 32, 8, 8, 8>>{"128x128x8 w64x32 t8x8"});
  f(Named<Cfg<128, 128, 16, 32, 64, 8, 8, 8>>{"128x128x16 w32x64 t8x8"});
  // 128 threads, 8x16 per thread, 2 CTAs/SM: fewer shared loads per FFMA.
  f(Named<Cfg<128, 128, 8, 64, 64, 8, 16, 8>>{"128x128x8 w64x64 t8x16"});
  f(Named<Cfg<128, 128, 16, 64, 64, 8, 16, 8>>{"128x128x16 w64x64 t8x16"});
  // 256 threads, 8x16 per thread, 1 CTA/SM.
  f(Named<Cfg<256, 128, 8, 64, 64, 8, 16, 8>>{"256x128x8 w64x64 t8x16"});
  // Small tile for small M x N.
  f(Named<Cfg<64, 64, 8, 32, 32, 8, 4, 8>>{"64x64x8 w32x32 t8x4"});
}

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
  }
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor);

  for_each_config([](auto named) { describe<typename decltype(named)::Gemm>(named.name); });

  std::vector<Shape> shapes = {
      {1024, 8192, 8192, true}, {1000, 1000, 1000, false}, {7, 1000, 1000, false},
      {2051, 300, 257, false},  {5, 3, 1, false},          {130, 129, 12, false},
      {33, 65, 3, false},
  };
  if (!quick) shapes.push_back({16384, 4096, 4096, true});

  for (const Shape& s : shapes) {
    Buffers b;
    const size_t total = static_cast<size_t>(s.M) * s.N;
    const size_t part = static_cast<size_t>(div_up(s.M, 64)) * s.N;  // smallest BM tested
    CHECK(cudaMalloc(&b.x, static_cast<size_t>(s.M) * s.K * sizeof(float)));
    CHECK(cudaMalloc(&b.w, static_cast<size_t>(s.N) * s.K * sizeof(float)));
    CHECK(cudaMalloc(&b.z, total * sizeof(float)));
    CHECK(cudaMalloc(&b.a, s.N * sizeof(float)));
    CHECK(cudaMalloc(&b.c, s.N * sizeof(float)));
    CHECK(cudaMalloc(&b.part_mean, part * sizeof(float)));
    CHECK(cudaMalloc(&b.part_m2, part * sizeof(float)));
    CHECK(cudaMalloc(&b.ref, total * sizeof(double)));
    CHECK(cudaMalloc(&b.ref_mean, part * sizeof(double)));
    CHECK(cudaMalloc(&b.ref_m2, part * sizeof(double)));
    CHECK(cudaMalloc(&b.stats, 3 * sizeof(ErrStats)));
    fill(b.x, static_cast<size_t>(s.M) * s.K, 1u + s.M, -1.f, 1.f);
    fill(b.w, static_cast<size_t>(s.N) * s.K, 2u + s.N, -1.f, 1.f);
    fill(b.a, s.N, 3u, 0.5f, 1.5f);
    fill(b.c, s.N, 4u, -1.f, 1.f);
    ref_gemm<<<dim3(div_up(s.N, 16), div_up(s.M, 16)), dim3(16, 16)>>>(b.x, b.w, b.ref, s.M,
                                                                        s.N, s.K);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    for_each_config(
        [&](auto named) { check_config<typename decltype(named)::Gemm>(named.name, s, b); });
    if (s.timed && !quick) {
      for_each_config(
          [&](auto named) { time_config<typename decltype(named)::Gemm>(named.name, s, b); });
    }

    CHECK(cudaFree(b.x));
    CHECK(cudaFree(b.w));
    CHECK(cudaFree(b.z));
    CHECK(cudaFree(b.a));
    CHECK(cudaFree(b.c));
    CHECK(cudaFree(b.part_mean));
    CHECK(cudaFree(b.part_m2));
    CHECK(cudaFree(b.ref));
    CHECK(cudaFree(b.ref_mean));
    CHECK(cudaFree(b.ref_m2));
    CHECK(cudaFree(b.stats));
  }

  // M = 0 / N = 0 must be a no-op that reports success.
  for (int mn : {0, 1}) {
    EpilogueParams p{};
    const int M = mn == 0 ? 0 : 16, N = mn == 0 ? 16 : 0;
    const cudaError_t e =
        Cfg<128, 128, 8, 32, 64, 8, 8, 8>::launch<Epi::kStore>(nullptr, nullptr, M, N, 16, p, 0);
    ++g_cases;
    if (e != cudaSuccess) ++g_failures;
    std::printf("%s M=%d N=%d launch returns cudaSuccess without launching\n",
                e == cudaSuccess ? "PASS" : "FAIL", M, N);
  }
  CHECK(cudaDeviceSynchronize());

  std::printf("%s: %d of %d checks failed\n", g_failures ? "FAILED" : "ALL PASSED", g_failures,
              g_cases);
  return g_failures ? 1 : 0;
}
