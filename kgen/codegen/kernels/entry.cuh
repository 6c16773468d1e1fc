// What the extension's C entry points of one GEMM part call (kgen_forward_<part> and
// kgen_workspace_floats_<part>, written by the template), from the emitted Python file through
// ctypes. Plain C types only: building an extension compiles no torch, ATen or pybind11 header
// (a pybind11 binding took ~30 of the ~40 s a candidate needed to build). ModelNew checks shapes,
// dtypes, devices and alignment before it calls; the entry points trust it and return the CUDA
// error text (nullptr on success). kgen_cfg::ForwardArgs and kgen_cfg::fill_operands are written
// by the template from the lists generator.py and lower.py make, the lists the Python side's
// ctypes signature and call come from too.
#pragma once

namespace kgen {

// Workspace layout: BatchNorm's partials, a, c and at, ct (when the module has a BatchNorm), then S
// (where the output's buffer cannot hold it: forward.cuh, kSInOutput); with the matrix-vector rewrite,
// its column-sum partials, column sums and shift total instead; last, with a broadcast tail, the
// stages' output (the tail's core value, output_width(N) per row).
inline long long gemv_floats(int N, int K) {
  return (colsum_chunks(N) + 1) * static_cast<long long>(K) + 1;
}
// BatchNorm's part of the workspace: the tile partials (mean, m2) and a, c, at, ct per column.
inline long long batchnorm_floats(long long tiles, int N) {
  return kgen_cfg::kHasBatchNorm ? (2 * tiles + 4) * static_cast<long long>(N) : 0;
}
inline long long stages_floats(int M, int N, int K) {
  // (A constant output that keeps torch's NaN: one word, kernels/constant.cuh's flag.)
  if (kgen_cfg::kConstantOutput) return kgen_cfg::ConstantReads::kAny ? 1 : 0;
  if (kgen_cfg::kGemv) return gemv_floats(N, K);
  if (kgen_cfg::kPrologue) return 0;   // (S is x itself: no S and no BatchNorm)
  const long long stats = batchnorm_floats(stats_tiles(M), N);
  return stats + (kSInOutput ? 0 : static_cast<long long>(M) * N);
}
inline long long core_floats(int M, int N) {
  return kgen_cfg::kHasTail ? static_cast<long long>(M) * kgen_cfg::output_width(N) : 0;
}
// ---- K padded for TMA: kgen's Hopper GEMMs read x and w by TMA, whose rows are whole 16-byte
// units. Where K is not a multiple of a row's elements (4 fp32, 8 bf16 / fp16), or is 0, the entry
// (pad_k.cuh, in such parts alone) copies x and w into the workspace's end with zero columns to a
// multiple of 8 (at least 8), and everything after the copy runs at that K (gemm_k). The zeros'
// products add nothing, and K = 0 gives z = 0 as torch's Linear does. (The copies cost less than
// any GEMM without TMA: fp32's, scalar loads and no split-K, took 84 us of an H200 at 300 x 1337 ->
// 260, eager's 27; docs/perf.md, session 56. Here rather than as torch ops in ModelNew, whose host
// time came before each launch: a synchronized fp32 call at that shape on an H200 took 116-133 us
// so, 41-48 us here, eager's 47-68; docs/perf.md, session 57.) kgen/tune/configs.py's gemm_k is
// this rule for the tuner (tests/test_pad_k.py ties them).
constexpr bool kPadsK = kgen_cfg::kPadsK && kOwnGemm;
inline int gemm_k(int K) {
  constexpr int kRowElements = 16 / static_cast<int>(sizeof(Operand));
  return kPadsK && (K % kRowElements != 0 || K == 0) ? K + 8 - K % 8 : K;
}
// A GEMM that splits K at small M (WgmmaWsGemm: split_floats) gets room for its partials last.
template <class G, class = void>
struct SplitsK : std::false_type {};
template <class G>
struct SplitsK<G, std::void_t<decltype(G::split_floats(0, 0, 0))>> : std::true_type {};
// (A template, so that the branch a GEMM without split_floats discards is never instantiated.)
template <class G = kgen_cfg::Gemm>
long long split_floats(int M, int N, int K) {
  if constexpr (SplitsK<G>::value && kOwnGemm) {
    return G::split_floats(M, N, K);
  } else {
    return 0;
  }
}
// A GEMM that keeps w's split from call to call (WgmmaWsF16x3Gemm: w_split_floats): the floats
// the caller holds for it, per weight, passed as the entry's w_split (0: none at this shape), and
// how many of them, first, the caller zeroes when it starts one (w_split_records_floats).
template <class G, class = void>
struct KeepsWSplit : std::false_type {};
template <class G>
struct KeepsWSplit<G, std::void_t<decltype(G::w_split_floats(0, 0, 0))>> : std::true_type {};
template <class G = kgen_cfg::Gemm>
long long w_split_floats(int M, int N, int K) {
  if constexpr (KeepsWSplit<G>::value && kOwnGemm) {
    return G::w_split_floats(M, N, gemm_k(K));
  } else {
    return 0;
  }
}
// (Where w may be split in registers, the split a caller that trusts w's version counter may hand
// the GEMM instead.)
template <class G = kgen_cfg::Gemm>
long long trusted_w_split_floats(int M, int N, int K) {
  if constexpr (KeepsWSplit<G>::value && kOwnGemm) {
    return G::trusted_w_split_floats(M, N, gemm_k(K));
  } else {
    return 0;
  }
}
template <class G = kgen_cfg::Gemm>
long long w_split_records_floats(int M, int N, int K) {
  if constexpr (KeepsWSplit<G>::value && kOwnGemm) {
    return G::w_split_records_floats(M, N, gemm_k(K));
  } else {
    return 0;
  }
}
// Where the split partials start: rounded up to 4 floats, as SplitK reads them as float4 (a
// broadcast tail's core value, M floats, leaves the offset odd at odd M).
inline long long split_offset(int M, int N, int K) {
  return (stages_floats(M, N, K) + core_floats(M, N) + 3) / 4 * 4;
}
inline long long gemm_workspace_floats(int M, int N, int K) {
  const long long splits = split_floats(M, N, K);
  return splits > 0 ? split_offset(M, N, K) + splits : stages_floats(M, N, K) + core_floats(M, N);
}

// The floats a padded copy of `rows` rows of k elements of T takes, whole 16-byte units.
template <class T>
long long padded_floats(long long rows, int k) {
  return (rows * k * static_cast<long long>(sizeof(T)) + 15) / 16 * 4;
}
// Where the padded copies start: after the GEMM's workspace at the padded K, on a 16-byte unit.
inline long long padded_offset(int M, int N, int K) {
  return (gemm_workspace_floats(M, N, gemm_k(K)) + 3) / 4 * 4;
}
inline long long workspace_floats(int M, int N, int K) {
  const int k = gemm_k(K);
  if (k == K) return gemm_workspace_floats(M, N, K);
  return padded_offset(M, N, K) + padded_floats<Operand>(M, k) + padded_floats<kgen_weight_t>(N, k);
}
// The GEMM's own memory in p, as both forward entries give it: its part of the workspace (split-K's
// partials, fp16x3's split of x, tf32x3's small part of x) and w's kept split.
inline void gemm_memory(const kgen_cfg::ForwardArgs& a, EpilogueParams& p) {
  if (split_floats(a.M, a.N, a.K) > 0) p.split_partials = a.workspace + split_offset(a.M, a.N, a.K);
  p.w_split = a.w_split;
  p.w_split_current = a.w_split_current;
}

// A part with a broadcast tail that keeps z for its backward keeps the core value too, after z
// and BatchNorm's per-column values (the tail's backward reads it: kernels/backward.cuh, tail_grad);
// the matrix-vector rewrite's, after its rows' sums (forward.cuh, gemv_kept_w_sum).
inline float* kept_core(float* z_out, int M, int N) {
  if (kgen_cfg::kGemv) return z_out + M;
  return z_out + static_cast<long long>(M) * N + static_cast<long long>(kgen_cfg::kKeptPerColumn) * N;
}

// The broadcast tail: the output's every element from the core value (struct Tail). A template,
// so that a part without a tail instantiates no tail kernel.
template <bool kHasTail = kgen_cfg::kHasTail>
cudaError_t run_tail(const float* core, void* out, int M, const EpilogueParams& p, cudaStream_t stream) {
  if constexpr (kHasTail) {
    const long long total = kgen_cfg::Tail::numel(M);
    const long long blocks = std::min<long long>((total + kTailThreads - 1) / kTailThreads, 65535LL * 8);
    if (total > 0 && M > 0) {
      tail_kernel<kgen_cfg::Tail><<<static_cast<int>(blocks), kTailThreads, 0, stream>>>(core, static_cast<PartOutput*>(out), total, M, p);
    }
    return cudaGetLastError();
  } else {
    return cudaSuccess;
  }
}

inline const char* forward_entry(const kgen_cfg::ForwardArgs& a) {
  const long long tiles = stats_tiles(a.M);
  float* ws = a.workspace;
  const long long stats = batchnorm_floats(tiles, a.N);
  Buffers b{};
  // With a broadcast tail the stages write its core value into the workspace (kept after z when
  // the backward will want it). (a.out's elements are PartOutput: forward.cuh)
  b.out = !kgen_cfg::kHasTail ? static_cast<float*>(a.out)
          : a.z_out != nullptr ? kept_core(a.z_out, a.M, a.N) : ws + stages_floats(a.M, a.N, a.K);
  // (a prologue's S is x itself, which no kernel writes: forward_impl)
  b.s = kgen_cfg::kPrologue ? const_cast<float*>(reinterpret_cast<const float*>(a.x)) : kSInOutput ? b.out : ws + stats;
  b.gemv = ws;
  if (kgen_cfg::kHasBatchNorm) {
    b.part_mean = ws;
    b.part_m2 = ws + tiles * a.N;
    b.col_a = ws + 2 * tiles * a.N;
    b.col_c = ws + (2 * tiles + 1) * a.N;
    b.col_at = ws + (2 * tiles + 2) * a.N;
    b.col_ct = ws + (2 * tiles + 3) * a.N;
    if (a.z_out != nullptr) {
      b.col_a = a.z_out + static_cast<long long>(a.M) * a.N;
      b.col_c = b.col_a + a.N;
      b.bn_saved = b.col_a + 2 * a.N;
    }
  }
  EpilogueParams p{};
  FinalizeArgs f{};
  kgen_cfg::fill_operands(a, p, f);
  gemm_memory(a, p);
#ifdef KGEN_CUBLAS_COMPUTE
  // (A constant output runs no GEMM, and its workspace has no room for z.) z into S, where the
  // epilogue then runs in place; or, kept for the backward, into z_out, from which the epilogue
  // reads it (forward_impl's z_ready).
  if (!kgen_cfg::kConstantOutput && !kgen_cfg::kPrologue) {
    float* const z = a.z_out != nullptr ? a.z_out : b.s;
    if (const char* err = kgen_api::cublas_gemm(a.x, a.w, z, a.M, a.N, a.K, a.stream)) return err;
  }
#endif
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  const char* err = forward_impl<kgen_cfg::Gemm>(a.x, a.w, a.M, a.N, a.K, a.training != 0, p, f, b, a.z_out, stream);
  if (err != nullptr || !kgen_cfg::kHasTail || a.M == 0) return err;
  const cudaError_t launched = run_tail(b.out, a.out, a.M, p, stream);
  return launched == cudaSuccess ? nullptr : cudaGetErrorString(launched);
}

}  // namespace kgen
