// The boundary between the torch binding and the kernels: plain C++ types only, so the kernel
// translation unit never sees torch headers and the binding never sees CUDA kernel code.
#pragma once

namespace kgen_api {

struct BnState {
  const float* bias;                      // Linear bias [N]
  const float* scale;                     // scale parameter, [1] or [N]
  int scale_stride;                       // 0 when scale broadcasts, else 1
  const float* gamma;                     // bn.weight [N]
  const float* beta;                      // bn.bias [N]
  float* running_mean;                    // [N]
  float* running_var;                     // [N]
  const long long* num_batches_tracked;   // device scalar, already incremented for this call
  float momentum;
  bool cumulative;                        // momentum=None
  float eps;
};

// Scratch the forward needs, sized by workspace_floats(M, N).
struct Workspace {
  float* part_mean;  // [stats tiles][N]
  float* part_m2;    // [stats tiles][N]
  float* col_a;      // [N]
  float* col_c;      // [N]
};

// Rows summarized by one statistics partial (depends on the variant's GEMM tile).
int stats_rows_per_tile();

// Runs the whole module after the GEMM input checks. `out` receives the module output; when
// the variant's GEMM is external (cuBLAS), `out` must already hold z = x * w^T.
// Returns nullptr on success, else the CUDA error string.
const char* forward(const float* x, const float* w, float* out, int M, int N, int K,
                    bool training, const BnState& bn, const Workspace& ws, void* stream);

}  // namespace kgen_api
