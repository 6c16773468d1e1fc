// A row sum in the order PyTorch's CUDA reduction takes it, for the cuBLAS fp32 variants: their
// GEMM is a plain cuBLAS fp32 call, as eager's torch.matmul / x @ W.t() / a Linear without bias
// is (a Linear with a bias is addmm, which torch may hand to cublasLt with the bias in its
// epilogue: not necessarily the same bits), so with the sum in eager's order too a row sum after
// the GEMM is eager's to the bit wherever the point-wise ops before it round as eager's do. That
// is what a judge that compares with eager (KernelBench's allclose(eager, new, 1e-4, 1e-4))
// needs of an ill-conditioned sum, one whose terms cancel (KernelBench 14: row sums of ~1e3 that
// pass near 0, where eager is itself 2e-2 from fp64 and any other order of the same fp32 terms
// differs from eager by ~1e-3). Where the bits differ, the sum is still an exact-order fp32 sum.
//
// The order, for x.sum(-1) of a contiguous fp32 (M, N) tensor: the launch configuration is ATen's
// (Reduce.cuh, setReduceConfig): rows are read as 4-element vectors; `width` threads (a power of
// two, 32 unless M is small) stride a row, and when each would take at least min(16 * height,
// 256) values, the `height` warps of a 512-thread block share the row too (else each takes a row
// of its own). Thread t of the row's threads accumulates vector t, t + T, ... into four
// accumulators, one per position in the vector, and combines them ((a0 + a1) + a2) + a3. The
// tree across threads was measured (torch 2.11, H100: docs/perf.md, session 8): along the row's
// threads first, halves (thread x takes x + width / 2, then + width / 4, ...), then across the
// warps, halves again. tests/test_eager_sum_gpu.py holds the result to torch.sum's bits. What was
// not measured sums in kgen's own order (correct, not eager's bits): rows of fewer than 256
// columns or not a multiple of 4, and rows split across blocks (from 256 values per thread).
#pragma once

namespace kgen {

struct EagerSumOrder {
  int width;    // threads along a row (ATen's block_width)
  int height;   // warps sharing the row (its block_height where the input is split), else 1
  bool exact;   // a configuration this file models
};

__host__ __device__ inline int eager_last_pow2(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

// ATen's configuration for a sum over the N columns of each of M rows.
__host__ __device__ inline EagerSumOrder eager_sum_order(int M, int N) {
  constexpr int kMaxThreads = 512, kWarp = 32, kVector = 4;
  EagerSumOrder o{1, 1, N >= 256 && N % kVector == 0};
  const int dim0 = N / kVector;
  const int dim0_pow2 = dim0 < kMaxThreads ? eager_last_pow2(dim0) : kMaxThreads;
  const int dim1_pow2 = M < kMaxThreads ? eager_last_pow2(M) : kMaxThreads;
  int width = dim0_pow2 < kWarp ? dim0_pow2 : kWarp;
  const int height = dim1_pow2 < kMaxThreads / width ? dim1_pow2 : kMaxThreads / width;
  width = dim0_pow2 < kMaxThreads / height ? dim0_pow2 : kMaxThreads / height;
  o.width = width;
  const int values = (N + width - 1) / width;
  const bool split = values >= 16 * height || values >= 256;
  o.height = split ? height : 1;
  if (split && (N + width * height - 1) / (width * height) >= 256) o.exact = false;
  return o;
}

// The sum over n < N of value(n) (value: the row's element n, computed as the variant computes
// it), in eager's order where eager_sum_order models it; every thread of the CTA (kRowThreads,
// one row) gets the result. The additions are __fadd_rn so that nvcc never contracts one with a
// multiplication in value() into an fma, which eager's separate kernels cannot do.
template <class Value>
__device__ float eager_row_sum(int M, int N, Value value, float* scratch) {
  const EagerSumOrder o = eager_sum_order(M, N);
  const int t = threadIdx.x;
  if (!o.exact) {
    float v = 0.f;
    for (int n = t; n < N; n += blockDim.x) v = __fadd_rn(v, value(n));
    return block_sum(v, scratch);
  }
  const int threads = o.width * o.height;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (t < threads) {
    for (int q = t; 4 * q + 3 < N; q += threads) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = __fadd_rn(acc[i], value(4 * q + i));
    }
  }
  float v = __fadd_rn(__fadd_rn(__fadd_rn(acc[0], acc[1]), acc[2]), acc[3]);
  __shared__ float shared[kRowThreads];
  const int x = t % o.width, y = t / o.width;
  __syncthreads();  // scratch and shared may still be read by an earlier reduction
  if (t < threads) shared[t] = v;
  // Along the row's threads first: halves in shared memory down to a warp (x takes x + offset),
  // then shuffles down 16, 8, ..., 1 (all halves: lane x takes lane x + offset).
  for (int offset = o.width / 2; offset >= 32; offset >>= 1) {
    __syncthreads();
    if (t < threads && x < offset) {
      v = __fadd_rn(v, shared[t + offset]);
      shared[t] = v;
    }
  }
  __syncthreads();
  for (int offset = (o.width < 32 ? o.width : 32) / 2; offset > 0; offset >>= 1) {
    v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  // Then across the warps sharing the row: halves again (warp y takes warp y + offset).
  if (t < threads && x == 0) shared[y] = v;
  for (int offset = o.height / 2; offset > 0; offset >>= 1) {
    __syncthreads();
    if (t < threads && x == 0 && y < offset) {
      v = __fadd_rn(v, shared[y + offset]);
      shared[y] = v;
    }
  }
  __syncthreads();
  if (t == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

}  // namespace kgen
