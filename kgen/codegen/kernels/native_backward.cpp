// The autograd node of a GEMM part in eager training, in C++ (ModelNew builds it with torch's
// headers: kgen_native_backward). A Python node (torch.autograd.Function) costs a bf16 training
// step ~0.1 ms of host time for the node alone and its vjp ~0.3 ms more, on autograd's device
// thread, between the forward's kernels and the backward's: the GPU waits (docs/perf.md, sessions
// 39-40); and each forward ~45 us a part where the kernels of a small module take a few
// (session 54). This node does the vjp's work without Python, as the Python vjp does
// (_kgen_launch_backward): it calls the part's C entry (kgen_backward_packed_<part>) through its
// address; for a bf16 / fp16 module the entry gives dz and the column sums, and torch's GEMMs
// dx = dz w and dW = dz^T x; for an fp32 module the entry runs kgen's fp32-exact GEMMs for dx and
// dW itself.
//
// Python gives each part a Plan once (make_plan: where each argument of the C entry comes from,
// and what each differentiable input's gradient is), then calls attach() after the part's forward
// ran: attach makes the forward's output a result of the node, which keeps what the backward reads.
// The node is an autograd Node of its own, made as torch's generated nodes are (next edges, saved
// variables, the output's gradient edge): torch::autograd::Function's apply, which the node was
// first, cost ~40-60 us of host time a forward on a 2-core CPU (its context's string-keyed
// saved_data, the inputs' metadata, the outputs' wrapping), as much as the part's whole body
// (docs/perf.md, session 58).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// Where an argument of the C entry comes from (kgen/codegen/generator.py reads these codes:
// native_codes, NATIVE_SOURCES).
enum Source : int64_t {
  kSaved = 0,        // saved tensor `index` (the part's inputs x, w, operand0..., then z): its address or null
  kGrad = 1,         // the output's gradient g
  kGradNumel = 2,    // its number of elements
  kDz = 3,           // dz (M x N, the module's dtype), which torch's GEMMs read
  kColumnGrads = 4,  // the column sums [rows][N], the parameters' dtype (fp32 in the build for autocast)
  kWorkspace = 5,    // the entry's fp32 workspace (kgen_backward_floats_<part>)
  kM = 6, kN = 7, kK = 8,
  kStream = 9,       // the forward's CUDA stream (autograd runs a node's backward on it)
  kBnTraining = 10,  // BatchNorm's mode in the forward
  kDInput = 11,      // the gradients of the inputs read after the GEMM, one after another (fp32), or null
  kDxOut = 12,       // dx where the entry computes it (an fp32 module's; wanted), else null
  kDwOut = 13,       // dW likewise
  kNeedDx = 14,      // whether the entry computes dx (0 where torch's GEMMs do)
  kNeedDw = 15,      // whether the entry computes dW
};

// What a differentiable input's gradient is (generator.py reads these codes: native_codes, NATIVE_GRADS).
enum Grad : int64_t {
  kNone = 0,       // none flows (behind a detach; a Dropout mask)
  kDx = 1,
  kDw = 2,
  kColumnRow = 3,  // row `index` of the column sums, its first `length` values (-1: all), in the
                   // shape of saved tensor `shape_of` (-1: as it is)
  kInputGrad = 4,  // an input's gradient, its block of kDInput's buffer (saved tensor `index`'s shape
                   // and dtype; the blocks in the order of the inputs, as the C entry's d_input slots)
};

using PackedEntry = const char* (*)(const long long*);
using BackwardFloats = long long (*)(int, int, int, long long);

struct Plan {
  PackedEntry entry;
  BackwardFloats floats;
  std::vector<std::pair<int64_t, int64_t>> sources;  // per argument of the entry: (Source, saved index)
  std::vector<std::array<int64_t, 4>> grads;         // per input of attach: (Grad, index, length, shape_of)
  int64_t column_rows;                               // the operands' rows, then BatchNorm's two
  int64_t saved_inputs;                              // the backward reads the first saved_inputs inputs, then z
  // kgen_backward_floats_<part>, asked once per shape (it may query the device)
  std::mutex mutex;
  std::array<long long, 4> floats_key{-1, -1, -1, -1};
  long long floats_value = 0;
};

std::mutex plans_mutex;
std::vector<std::unique_ptr<Plan>> plans;   // never freed: one per part of a file's build

int64_t make_plan(int64_t entry, int64_t floats, std::vector<std::pair<int64_t, int64_t>> sources,
                  std::vector<std::array<int64_t, 4>> grads, int64_t column_rows, int64_t saved_inputs) {
  TORCH_CHECK(saved_inputs >= 2 && saved_inputs <= static_cast<int64_t>(grads.size()),
              "kgen: a plan saving ", saved_inputs, " of ", grads.size(), " inputs");
  auto plan = std::make_unique<Plan>();
  plan->entry = reinterpret_cast<PackedEntry>(entry);
  plan->floats = reinterpret_cast<BackwardFloats>(floats);
  plan->sources = std::move(sources);
  plan->grads = std::move(grads);
  plan->column_rows = column_rows;
  plan->saved_inputs = saved_inputs;
  std::lock_guard<std::mutex> lock(plans_mutex);
  plans.push_back(std::move(plan));
  return reinterpret_cast<int64_t>(plans.back().get());
}

long long workspace_floats(Plan& plan, int64_t M, int64_t N, int64_t K, int64_t g_numel) {
  std::lock_guard<std::mutex> lock(plan.mutex);
  const std::array<long long, 4> key{M, N, K, g_numel};
  if (key != plan.floats_key) {
    plan.floats_value = plan.floats(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), g_numel);
    plan.floats_key = key;
  }
  return plan.floats_value;
}

// t, contiguous and 16-byte aligned: the kernels read rows with 16-byte loads (_kgen_aligned).
at::Tensor aligned(const at::Tensor& t) {
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) return t;
  at::Tensor c = t.contiguous();
  return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

long long address(const at::Tensor& t) {
  return t.defined() ? static_cast<long long>(reinterpret_cast<uintptr_t>(t.data_ptr())) : 0;
}

struct PartNode : public torch::autograd::Node {
  // slots[i]: the plan's input whose gradient goes to next edge i; saved: x, w, the operands and z
  // (undefined where absent).
  Plan* plan = nullptr;
  std::vector<int64_t> slots;
  std::vector<SavedVariable> saved;
  int64_t bn_training = 0, autocast = 0, stream = 0;

  std::string name() const override { return "kgen::PartNode"; }
  void release_variables() override {
    for (auto& s : saved) s.reset_data();
  }
  variable_list apply(variable_list&& grads) override;
};

// A node as the edges of the torch it is built against hold one: std::shared_ptr (torch 2.11) or
// c10::intrusive_ptr (2.13). (Only the matching specialization's make is instantiated.)
using NodePtr = decltype(torch::autograd::Edge::function);
template <class Ptr>
struct NodeMaker;
template <class T>
struct NodeMaker<std::shared_ptr<T>> {
  // Freed by torch's deleteNode, as torch's own nodes are: it frees a long chain of nodes (a
  // ModelNew applied to its own output many times) iteratively, where the default deleter's
  // nested destructors would overflow the stack. (Called unqualified, with a dependent argument:
  // found by argument-dependent lookup at instantiation, in the torch that has it.)
  template <class N>
  static std::shared_ptr<N> make() { return std::shared_ptr<N>(new N(), [](N* p) { deleteNode(p); }); }
};
template <class T>
struct NodeMaker<c10::intrusive_ptr<T>> {
  template <class N>
  static c10::intrusive_ptr<N> make() { return c10::make_intrusive<N>(); }
};

variable_list PartNode::apply(variable_list&& grads) {
  if (at::GradMode::is_enabled())
    throw std::runtime_error(
        "kgen's backward kernels give first derivatives only: differentiating their gradient "
        "(create_graph=True) is not supported, as for a once_differentiable function");
  Plan& plan = *this->plan;
  variable_list saved;
  saved.reserve(this->saved.size());
  for (auto& s : this->saved) saved.push_back(s.unpack());   // (raises after the graph was freed)
  const at::Tensor& x = saved[0];
  const at::Tensor& w = saved[1];
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  bool need_dx = false, need_dw = false, need_input = false;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!task_should_compute_output(i)) continue;
    const int64_t kind = plan.grads[slots[i]][0];
    need_dx = need_dx || kind == kDx;
    need_dw = need_dw || kind == kDw;
    need_input = need_input || kind == kInputGrad;
  }
  // An fp32 module's GEMMs are kgen's own, in the entry (fp32-exact); a 16-bit module's are torch's,
  // in the module's dtype, from the entry's dz (kgen's 16-bit GEMM takes no transposed operands).
  const bool entry_gemms = x.scalar_type() == at::kFloat;
  // (Zeros where a GEMM has nothing to sum: a batch of 0 gives dW = 0, no features dx = 0.)
  const bool empty_dims = M == 0 || N == 0 || K == 0;
  // (the kernels read g in x's dtype: an fp32 output of the build for torch.autocast's is converted)
  // (an output autograd sent no gradient to is one of zeros, as torch::autograd::Function gives it)
  const at::Tensor g0 = grads[0].defined() ? grads[0] : input_metadata(0).zeros_like();
  const at::Tensor g = aligned(g0.scalar_type() == x.scalar_type() ? g0 : g0.to(x.scalar_type()));
  // (in the parameters' dtype: x's, but fp32 in the build for torch.autocast, kernels/common.cuh's Param)
  const at::Tensor column_grads = at::empty(
      {plan.column_rows, N}, autocast ? x.options().dtype(at::kFloat) : x.options());
  const long long floats = workspace_floats(plan, M, N, K, g.numel());
  const at::Tensor workspace = at::empty({std::max(floats, 1LL)}, x.options().dtype(at::kFloat));
  const at::Tensor dz = entry_gemms ? at::Tensor() : at::empty({M, N}, x.options());
  at::Tensor dx, dw;
  if (entry_gemms && need_dx) dx = empty_dims ? at::zeros(x.sizes(), x.options()) : at::empty(x.sizes(), x.options());
  if (entry_gemms && need_dw) dw = empty_dims ? at::zeros(w.sizes(), w.options()) : at::empty(w.sizes(), w.options());
  // The inputs' gradients one after another, each in its input's shape (kInputGrad's blocks):
  // where each starts.
  std::vector<int64_t> input_offset(plan.grads.size(), 0);
  int64_t input_floats = 0;
  for (size_t i = 0; i < plan.grads.size(); ++i) {
    if (plan.grads[i][0] != kInputGrad) continue;
    input_offset[i] = input_floats;
    input_floats += saved[plan.grads[i][1]].numel();
  }
  at::Tensor d_input;
  if (need_input) d_input = at::zeros({input_floats}, x.options().dtype(at::kFloat));
  // (the saved tensors as the kernels read them; held until the entry returns)
  std::vector<at::Tensor> read(saved.size());
  for (size_t i = 0; i < saved.size(); ++i)
    if (saved[i].defined()) read[i] = aligned(saved[i]);
  std::vector<long long> args(plan.sources.size());
  for (size_t i = 0; i < plan.sources.size(); ++i) {
    const int64_t index = plan.sources[i].second;
    switch (plan.sources[i].first) {
      case kSaved: args[i] = address(read[index]); break;
      case kGrad: args[i] = address(g); break;
      case kGradNumel: args[i] = g.numel(); break;
      case kDz: args[i] = address(dz); break;
      case kDxOut: args[i] = address(dx); break;
      case kDwOut: args[i] = address(dw); break;
      case kNeedDx: args[i] = entry_gemms && need_dx; break;
      case kNeedDw: args[i] = entry_gemms && need_dw; break;
      case kColumnGrads: args[i] = address(column_grads); break;
      case kWorkspace: args[i] = address(workspace); break;
      case kM: args[i] = M; break;
      case kN: args[i] = N; break;
      case kK: args[i] = K; break;
      case kStream: args[i] = stream; break;
      case kBnTraining: args[i] = bn_training; break;
      case kDInput: args[i] = d_input.defined() && d_input.numel() ? address(d_input) : 0; break;
      default: args[i] = 0;
    }
  }
  if (const char* error = plan.entry(args.data()))
    throw std::runtime_error(std::string("kgen backward kernel failed: ") + error);
  if (!entry_gemms) {
    // torch's GEMMs in the module's dtype, under autocast too (as the Python vjp's); an fp32
    // weight beside 16-bit x (the build for autocast that rounds it in its GEMM): dx from its
    // copy in x's dtype, dW handed back in fp32, as autocast's conversion of the weight does
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const bool fp32_weight = w.scalar_type() != x.scalar_type();
    if (need_dx) dx = at::mm(dz, fp32_weight ? w.to(x.scalar_type()) : w);
    if (need_dw) dw = fp32_weight ? at::mm(dz.t(), x).to(w.scalar_type()) : at::mm(dz.t(), x);
  }
  variable_list result(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!task_should_compute_output(i)) continue;
    const auto& [kind, index, length, shape_of] = plan.grads[slots[i]];
    switch (kind) {
      case kDx: result[i] = dx; break;
      case kDw: result[i] = dw; break;
      case kColumnRow: {
        at::Tensor row = length >= 0 ? column_grads[index].narrow(0, 0, length) : column_grads[index];
        result[i] = shape_of >= 0 ? row.reshape(saved[shape_of].sizes()) : row;
        break;
      }
      case kInputGrad: {   // (in the read's shape and dtype)
        const at::Tensor& read = saved[index];
        result[i] = d_input.narrow(0, input_offset[slots[i]], read.numel()).view(read.sizes()).to(read.scalar_type());
        break;
      }
      default: break;
    }
  }
  return result;
}

// The part's output `out` (its forward ran: the kernels wrote it and kept z) as the result of a
// PartNode: `inputs` are the plan's (x, w, operand0..., gamma, beta; None where absent), of which
// the backward reads the first plan.saved_inputs, and z. Returned as it is where autograd records
// nothing (no gradient wanted), as torch::autograd::Function's apply returns it.
at::Tensor attach(int64_t plan, const std::vector<std::optional<at::Tensor>>& inputs, const at::Tensor& z,
                  at::Tensor out, int64_t bn_training, int64_t autocast, int64_t stream) {
  Plan& p = *reinterpret_cast<Plan*>(plan);
  TORCH_CHECK(inputs.size() == p.grads.size(), "kgen: ", inputs.size(), " inputs for a plan of ", p.grads.size());
  std::vector<at::Tensor> vars;
  std::vector<int64_t> slots;
  bool wanted = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].has_value() || !inputs[i]->defined()) continue;
    if (p.grads[i][0] != kNone) {
      // (torch::autograd::Function refused a dual tensor among these too: the node has no
      // forward-mode formula; an input no gradient flows from, a Dropout mask, drops its tangent)
      TORCH_CHECK(!inputs[i]->_fw_grad(/*level=*/0).defined(),
                  "kgen's kernels have no forward-mode gradient (torch.autograd.forward_ad, torch.func.jvp): "
                  "use the reference Model there");
      vars.push_back(*inputs[i]);
      slots.push_back(static_cast<int64_t>(i));
      wanted = wanted || inputs[i]->requires_grad();
    }
  }
  if (!at::GradMode::is_enabled() || !wanted) return out;
  TORCH_CHECK(!out.is_view() && !out.requires_grad(), "kgen: a part's output is a fresh tensor");
  auto node = NodeMaker<NodePtr>::template make<PartNode>();
  node->plan = &p;
  node->slots = std::move(slots);
  node->bn_training = bn_training;
  node->autocast = autocast;
  node->stream = stream;
  node->set_next_edges(torch::autograd::collect_next_edges(vars));
  node->saved.reserve(p.saved_inputs + 1);
  for (int64_t i = 0; i < p.saved_inputs; ++i)
    node->saved.emplace_back(inputs[i].has_value() ? *inputs[i] : at::Tensor(), /*is_output=*/false);
  node->saved.emplace_back(z, /*is_output=*/false);
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("make_plan", &make_plan, "A part's plan: its C entry's and workspace query's addresses, "
        "where each entry argument comes from, each input's gradient, the column sums' rows");
  m.def("attach", &attach, "A part's forward output as the result of its C++ autograd node");
}
