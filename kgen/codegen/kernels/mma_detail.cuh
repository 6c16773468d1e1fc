// The mma.sync helpers that kgen's tensor-core GEMMs share (gemm_mma.cuh's MmaGemm, and the
// wgmma GEMMs of gemm_wgmma*.cuh, which load, swizzle and round tf32 the same way): the math
// modes, the cp.async loader into XOR-swizzled shared tiles, ldmatrix, the m16n8k8 / m16n8k16
// MMAs, the tf32 / bf16 conversions and the grid launch. gemm_mma.cuh's top says how they are used and why.
//
// Follows common.cuh (concatenated before this file; not included here).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

namespace kgen {

enum class MathMode { kTF32x3, kTF32, kBF16, kTF32x3Rn };

namespace mma_detail {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// src_size 0 zero-fills the destination without reading src (out-of-range rows / k).
__device__ __forceinline__ void cp_async16(uint32_t dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async4(uint32_t dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Shared tiles are [rows][BK] fp32 with the 16-byte chunks of each row XOR-swizzled by a key
// that depends on the row. The 8 rows read by one ldmatrix phase must cover all 8 16-byte bank
// groups; rows shorter than 128 bytes share a 128-byte line, so the key advances every
// 8 / chunks rows. For BK = 32 (128-byte rows) this is exactly the 128-byte swizzle that wgmma
// descriptors name (chunk ^= row % 8 within 1024-byte atoms).
template <int BK>
__device__ __forceinline__ int swizzle_key(int row) {
  constexpr int kChunks = BK / 4;
  constexpr int kSwzRows = kChunks >= 8 ? 1 : 8 / kChunks;
  constexpr int kSwzMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  return (row / kSwzRows) & kSwzMask;
}

// One stage of one operand: rows [row0, row0 + ROWS) x k [k0, k0 + BK) of a K-major matrix
// g, zero-filled outside [0, rows_total) x [0, K), into the swizzled tile at shared address s.
// kVec16: 16-byte copies, valid when K % 4 == 0 (a chunk is then wholly inside or outside K);
// otherwise 4-byte copies. Each thread keeps one column (chunk or element) and walks rows
// kRowStep apart with a running pointer, so nothing per row is worth hoisting out of the k
// loop into registers.
template <int ROWS, int BK, int NTHREADS, bool kVec16>
__device__ __forceinline__ void load_swizzled_rows(uint32_t s, const float* g, int row0,
                                                   int rows_total, int K, int k0, int tid) {
  constexpr int kChunks = BK / 4;
  constexpr int kCols = kVec16 ? kChunks : BK;  // copies per row
  static_assert(NTHREADS % kCols == 0, "the copy layout needs NTHREADS % (copies per row) == 0");
  constexpr int kRowStep = NTHREADS / kCols;
  constexpr int kIters = (ROWS + kRowStep - 1) / kRowStep;
  const int col = tid % kCols;
  const int r0 = tid / kCols;
  const int gk = k0 + (kVec16 ? col * 4 : col);
  const bool k_ok = gk < K;
  const int rows_left = rows_total - row0 - r0;
  const size_t stride = static_cast<size_t>(kRowStep) * K;
  const float* src = g + static_cast<size_t>(row0 + r0) * K + gk;
  if constexpr (kVec16) {
#pragma unroll
    for (int j = 0; j < kIters; ++j, src += stride) {
      const int r = r0 + j * kRowStep;
      if (ROWS % kRowStep == 0 || r < ROWS) {
        const bool ok = k_ok && j * kRowStep < rows_left;
        cp_async16(s + (r * BK + ((col ^ swizzle_key<BK>(r)) << 2)) * 4, ok ? src : g, ok);
      }
    }
  } else {
    // 4x the copies: unrolled, their hoisted addresses would take registers from the
    // mainloop (this path only serves K % 4 != 0).
#pragma unroll 1
    for (int j = 0; j < kIters; ++j, src += stride) {
      const int r = r0 + j * kRowStep;
      if (ROWS % kRowStep == 0 || r < ROWS) {
        const bool ok = k_ok && j * kRowStep < rows_left;
        cp_async4(s + (r * BK + (((col >> 2) ^ swizzle_key<BK>(r)) << 2) + (col & 3)) * 4,
                  ok ? src : g, ok);
      }
    }
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                        uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d = a * b (C = 0), for a fresh accumulator.
__device__ __forceinline__ void mma_tf32_zc(float (&d)[4], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.f));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The tf32 MMA reads only the top 19 bits of each 32-bit operand (the low 13 mantissa bits are
// ignored, i.e. truncated), so rounding needs only the carry into bit 13, not the mask.

// tf32x3 split. big = round-to-nearest-away tf32(v), masked so that small = v - big is exact in
// fp32; identical to cvt.rna.tf32.f32 for every non-NaN v (2 integer ops instead of 4).
// small is handed to the MMA as is, i.e. truncated to tf32 by the tensor core rather than by
// cvt.rna: that saves 2 more ops per element in the hottest ALU path, costs at most 2^-21 |v|
// (vs 2^-22) in representation error, far below the fp32 accumulation error, and keeps NaN
// inputs propagating (big of the canonical NaN 0x7fffffff wraps to -0, small stays NaN).
// An infinite v splits into inf and inf - inf = NaN, so an infinite input makes the output NaN
// wherever eager's is +-inf. Where a point-wise op of the module can turn that NaN into a number
// (a where, fmax, x ** 0: ops.gives_a_number_for_nan), the generated source defines
// KGEN_SPLIT_KEEPS_INFINITIES and big is clamped to the largest tf32 number of its sign: an
// infinite v splits into that and small = +-inf, whose products with the other operand's parts
// are one infinity of the product's sign and finite numbers, as eager's x * w (0 * inf = NaN
// where w is 0, as in eager). It costs the 3xTF32 GEMM 3-4 % (H100: docs/perf.md, session 17),
// hence not everywhere. (fminf / fmaxf drop a NaN big; small then carries the NaN.) An infinite
// weight still gives NaN (the Hopper kernels' small part of w, wgmma_detail::small_part_b, is
// inf - inf): kgen validate puts infinities in the input only.
#ifndef KGEN_SPLIT_KEEPS_INFINITIES
#define KGEN_SPLIT_KEEPS_INFINITIES 0
#endif
__device__ __forceinline__ void split_tf32(uint32_t v, uint32_t& big, uint32_t& small) {
  float b = __uint_as_float((v + 0x1000u) & 0xffffe000u);
  if constexpr (KGEN_SPLIT_KEEPS_INFINITIES) {
    const float largest = __int_as_float(0x7f7fe000);
    b = fminf(fmaxf(b, -largest), largest);
  }
  big = __float_as_uint(b);
  small = __float_as_uint(__uint_as_float(v) - b);
}

// Round-to-nearest-away to tf32 with the MMA's truncation doing the masking. Non-finite values
// pass through untouched so that the carry cannot turn a NaN into a number.
__device__ __forceinline__ uint32_t round_tf32(uint32_t v) {
  return fabsf(__uint_as_float(v)) < __int_as_float(0x7f800000) ? v + 0x1000u : v;
}

// Two fp32 (as raw bits) to bf16x2, round-to-nearest-even; lo lands in bits 0..15.
__device__ __forceinline__ uint32_t pack_bf16(uint32_t lo, uint32_t hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(__uint_as_float(hi)),
      "f"(__uint_as_float(lo)));
  return r;
}

using GemmKernel = void (*)(const float*, const float*, int, int, int, EpilogueParams);

// The launch of a tensor-core GEMM: one CTA per BM x BN tile of z. vec16 is the kernel for
// K % 4 == 0, whose 16-byte cp.async needs every row start 16-byte aligned (x and w are);
// scalar serves any K.
template <int BM, int BN>
cudaError_t launch_tiles(GemmKernel vec16, GemmKernel scalar, int threads, int smem_bytes,
                         const float* x, const float* w, int M, int N, int K,
                         const EpilogueParams& p, cudaStream_t stream) {
  unsigned tiles = 0;
  cudaError_t status;
  if (!kgen::tile_grid<BM, BN>(M, N, K, tiles, status)) return status;
  const GemmKernel kernel = K % 4 == 0 ? vec16 : scalar;
  if (smem_bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (e != cudaSuccess) return e;
  }
  kernel<<<tiles, threads, smem_bytes, stream>>>(x, w, M, N, K, p);
  return cudaGetLastError();
}

}  // namespace mma_detail

}  // namespace kgen
