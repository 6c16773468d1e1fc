// Session 50: what hashing a row of w costs beside reading it (w's kept fp16x3 split checks each
// row's hash on every call). One block of 256 threads per row of an 8192 x 8192 fp32 matrix, each
// thread holding 8 float4 as f16x3_split_kernel holds a row; each variant's row hash written out
// (so that nothing is optimized away). (Call B printed the rate as 0.00 TB/s: a unit slip, since
// mended; the times stand.) nvcc -O3 -arch=sm_90a hash_bench.cu -o hash_bench
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kThreads = 256, kHeld = 8;

__device__ __forceinline__ uint32_t murmur_term(uint32_t bits, uint32_t c) {
  uint32_t h = (bits ^ (bits >> 16)) + c * 0x9e3779b9u;
  h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; return h ^ (h >> 16);
}

template <int V>
__global__ void __launch_bounds__(kThreads) hash_rows(const float* __restrict__ w, int K, unsigned long long* out) {
  const float4* src = reinterpret_cast<const float4*>(w + static_cast<long long>(blockIdx.x) * K);
  const int quads = K / 4;
  float4 held[kHeld];
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int i = threadIdx.x + r * kThreads;
    held[r] = i < quads ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  unsigned long long s1 = 0, s2 = 0;
  float amax = 0.f;
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const uint32_t c0 = 4u * (threadIdx.x + r * kThreads);
    const uint32_t b[4] = {__float_as_uint(held[r].x), __float_as_uint(held[r].y), __float_as_uint(held[r].z),
                           __float_as_uint(held[r].w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t c = c0 + j;
      if (V == 0) s1 += b[j];
      if (V == 1) { const uint32_t t = murmur_term(b[j], c); s1 += t; s2 += static_cast<unsigned long long>(t) * t; }
      if (V == 2 || V == 4) {
        const uint32_t k = c * 0x9e3779b9u + 0x7f4a7c15u;
        const uint32_t a = b[j] + k, e = b[j] ^ (k * 0x85ebca6bu);
        s1 += static_cast<unsigned long long>(a) * a;
        s2 += static_cast<unsigned long long>(e) * e;
      }
      if (V == 3) { const uint32_t a = b[j] + (c * 0x9e3779b9u + 0x7f4a7c15u); s1 += static_cast<unsigned long long>(a) * a; }
      if (V == 4) amax = fmaxf(amax, isinf(__uint_as_float(b[j])) ? 0.f : fabsf(__uint_as_float(b[j])));
    }
    if (V == 5) {   // NH over pairs, two lanes
      const uint32_t k0 = c0 * 0x9e3779b9u, k1 = k0 + 0x9e3779b9u, k2 = k1 + 0x9e3779b9u, k3 = k2 + 0x9e3779b9u;
      s1 += static_cast<unsigned long long>(b[0] + k0) * (b[1] + k1) + static_cast<unsigned long long>(b[2] + k2) * (b[3] + k3);
      s2 += static_cast<unsigned long long>(b[0] + k2) * (b[1] + k3) + static_cast<unsigned long long>(b[2] + (k0 ^ 0x5bd1e995u)) * (b[3] + (k1 ^ 0x5bd1e995u));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  }
  if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x, s1 ^ s2 ^ __float_as_uint(amax));
}

template <int V>
float time_it(const float* w, int rows, int K, unsigned long long* out) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) hash_rows<V><<<rows, kThreads>>>(w, K, out);
  cudaEventRecord(a);
  for (int i = 0; i < 20; ++i) hash_rows<V><<<rows, kThreads>>>(w, K, out);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 20 * 1000;
}

int main() {
  const int rows = 8192, K = 8192;
  float* w; unsigned long long* out;
  cudaMalloc(&w, sizeof(float) * rows * K);
  cudaMalloc(&out, sizeof(unsigned long long) * rows);
  cudaMemset(w, 1, sizeof(float) * rows * K);
  const double mb = 4.0 * rows * K / 1e6;
  const char* names[] = {"read only (sum of bits)", "murmur terms + squares (session 50's first)", "two square hashes",
                         "one square hash", "two square hashes + largest magnitude", "NH pairs, two lanes"};
  float us[6] = {time_it<0>(w, rows, K, out), time_it<1>(w, rows, K, out), time_it<2>(w, rows, K, out),
                 time_it<3>(w, rows, K, out), time_it<4>(w, rows, K, out), time_it<5>(w, rows, K, out)};
  for (int v = 0; v < 6; ++v) printf("| %s | %.1f us | %.2f TB/s |\n", names[v], us[v], mb / us[v]);
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
