// The extension's C entry points, called from the emitted Python file through ctypes. Plain C
// types only: building an extension compiles no torch, ATen or pybind11 header (a pybind11
// binding took ~30 of the ~40 s a candidate needed to build). ModelNew checks shapes, dtypes,
// devices and alignment before it calls; the entry points trust it and return the CUDA error
// text (nullptr on success). kgen_cfg::ForwardArgs and the extern "C" kgen_forward that fills
// it are written by the template from generator.FORWARD_ARGS, the list the Python side's ctypes
// signature comes from too.
#pragma once

namespace kgen_api {

inline long long workspace_floats(int M, int N) {
  const long long tiles = (M + stats_rows_per_tile() - 1) / stats_rows_per_tile();
  return (2 * tiles + 2) * static_cast<long long>(N);
}

inline const char* forward_entry(const kgen_cfg::ForwardArgs& a) {
  BnState bn{};
  bn.bias = a.bias;
  bn.scale = a.scale;
  bn.scale_stride = a.scale_stride;
  bn.gamma = a.gamma;
  bn.beta = a.beta;
  bn.running_mean = a.running_mean;
  bn.running_var = a.running_var;
  bn.num_batches_tracked = a.num_batches_tracked;
  bn.momentum = a.momentum;
  bn.cumulative = a.cumulative != 0;
  bn.eps = a.eps;
  const long long tiles = (a.M + stats_rows_per_tile() - 1) / stats_rows_per_tile();
  float* ws = a.workspace;
  const Workspace workspace{ws, ws + tiles * a.N, ws + 2 * tiles * a.N, ws + (2 * tiles + 1) * a.N};
#ifdef KGEN_CUBLAS_COMPUTE
  if (const char* err = cublas_gemm(a.x, a.w, a.out, a.M, a.N, a.K, a.stream)) return err;
#endif
  return forward(a.x, a.w, a.out, a.M, a.N, a.K, a.training != 0, bn, workspace, a.stream);
}

}  // namespace kgen_api

extern "C" long long kgen_workspace_floats(int M, int N) {
  return kgen_api::workspace_floats(M, N);
}
