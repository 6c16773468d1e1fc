"""ModelNew's kernels as torch.library custom ops (one per GEMM part).

CPU: each op's schema is the C entry's argument list less what _kgen_launch makes (one list, so
they cannot drift apart); the ops are functional (no argument is mutated: torch.compile and
autograd need that, and a BatchNorm part returns its updated running statistics instead);
their fake kernels, run on meta tensors, give the shapes the kernels write; executing a file a
second time in one process (KernelBench does) reuses the ops the first execution registered.
GPU (marked): torch.compile(fullgraph=True) traces ModelNew whole and computes what eager
ModelNew does, BatchNorm buffers included; a CUDA graph captures and replays it; and so do
whole training steps (forward, backward, SGD) where every part has backward kernels, while a
part without them raises a clear error at backward().
"""

import contextlib
import copy
import ctypes

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.search import enumerate_specs
from kgen.tune.spec import Spec, Tile

from conftest import REFS_DIR, SYNTHESIZED_REFS, stand_in_launch
from test_render import exec_file

WGMMA = Tile(128, 128, 32, 16, 128, stages=4)
# One wgmma spec per module of tests/refs/ and per shipped problem (features: a multiple of
# every GroupNorm's groups).
# (A module that rewrites make constant has one spec: no GEMM.)
SPECS = [next((s for s in specs if s.family == "wgmma"), specs[0])
         for specs in (enumerate_specs(str(p), 64, 128, 1024) for p in SYNTHESIZED_REFS)] + [
    Spec.of(p, 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=2, tile=WGMMA)
    for p in ("gemm_scale_bn", "gemm_bn_scale_softmax")]


def meta_args(module, part: int, x: torch.Tensor, n: int, lowered=None) -> dict:
    """Keyword arguments of part `part`'s op: meta tensors of the right sizes (`lowered` gives
    the operands' shapes; else n elements each), zeros for numbers."""
    args = {"x": x, "w": torch.empty(n, x.shape[1], device="meta")}
    shapes = {f"operand{k}": (1,) if node.level == "scalar" else tuple(x.shape) if node.kind == "input" else (n,)
              for k, node in enumerate(lowered.operands if lowered else [])}
    for name, ctype in module._KGEN_FORWARD_ARGS[part]:
        if name in args or name in generator.LAUNCH_ARGS:
            continue
        args[name] = torch.empty(shapes.get(name, (n,)), device="meta") if ctype is ctypes.c_void_p else 0
    args["autocast"] = 0        # (the op's own argument: not the C entry's)
    if module._KGEN_BACKWARD_ARGS[part] is not None:
        args["keep_z"] = 1      # as in training: the forward keeps z for the backward's kernels
    return args


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.problem_name)
def test_ops_are_the_entry_points_and_their_fake_kernels_give_the_output_shapes(spec):
    module = exec_file(generator.render(spec))
    again = exec_file(generator.render(spec), "again")
    parts = generator.lowered_parts(spec)
    assert len(module._KGEN_OPS) == len(parts)
    x = torch.empty(64, 128, device="meta")
    for k, (op, low) in enumerate(zip(module._KGEN_OPS, parts)):
        assert again._KGEN_OPS[k] is op            # registered once per process
        schema = op.default._schema
        assert str(schema.name) == f"{module._KGEN_OP_NAMESPACE}::part{k}"
        expected = [name for name, _ in module._KGEN_FORWARD_ARGS[k] if name not in generator.LAUNCH_ARGS]
        expected += ["autocast"] + (["keep_z"] if module._KGEN_BACKWARD_ARGS[k] is not None else [])
        assert [a.name for a in schema.arguments] == expected
        assert not any(a.alias_info and a.alias_info.is_write for a in schema.arguments)
        n = low.graph.out_features
        result = op(**meta_args(module, k, x, n))
        kept_per_column = 5 if low.batchnorm else 0     # BatchNorm's a, c, x̂ coefficients, γ/σ
        # A broadcast tail's core value (the stages' output), kept after them for the tail's backward.
        core = x.shape[0] * generator.core_width(low)
        if low.batchnorm and module._KGEN_BACKWARD_ARGS[k] is not None:
            out, kept, running_mean, running_var = result
            assert running_mean.shape == running_var.shape == (n,)
            assert tuple(kept.shape) == (x.shape[0] * n + kept_per_column * n + core,)
        elif low.batchnorm:
            out, running_mean, running_var = result
            assert running_mean.shape == running_var.shape == (n,)
        elif module._KGEN_BACKWARD_ARGS[k] is not None:
            out, kept = result     # z kept for the backward: M x N (and a tail's core value)
            assert tuple(kept.shape) == (x.shape[0] * n + core,)
        else:
            out = result
        assert out.device.type == "meta"
        assert tuple(out.shape) == tuple(module._kgen_output_shape(k, 64, n))
        x = out if k + 1 < len(parts) else x


def test_each_call_takes_the_cheapest_path_that_keeps_what_it_needs(monkeypatch):
    """ModelNew's forward calls each part through _kgen_part_call: in eager inference (no gradient
    wanted) the op's body directly (the op's dispatch is host time on every call: 124.6 -> 85.9
    us a call of KernelBench 12 at 7 rows on an H100); in eager training the part's C++
    autograd node (a Python autograd.Function costs a forward ~45 us more, session 54), or with
    KGEN_PYTHON_AUTOGRAD=1 the autograd.Function (the op's dispatch, forward and backward, cost a
    bf16 training step ~1 ms of host time on an H100's host, session 13); wherever
    torch.compile traces, the tensors are fake or something records the call, the op (its
    autograd formula and fake kernel are registered there); a part without backward kernels
    trains through the op, whose backward raises."""
    module = exec_file(generator.render(SPECS[0]))
    calls = []
    for table, label in (("_KGEN_OPS", "op"), ("_KGEN_IMPLS", "impl"), ("_KGEN_AUTOGRAD", "function")):
        monkeypatch.setattr(module, table, (lambda x, w, label=label, **args: calls.append(label) or label,))
    monkeypatch.setattr(module, "_kgen_native_call", lambda part, x, w, args: "node")
    x, w, b = torch.rand(3, 4), torch.rand(5, 4), torch.rand(5)
    assert module._kgen_part_call(0, x, w, training=0, operand0=b) == "impl"
    with torch.no_grad():
        assert module._kgen_part_call(0, x, w.requires_grad_(), operand0=b) == "impl"
    assert module._kgen_part_call(0, x, w, operand0=b) == "node"        # w requires grad
    assert module._kgen_part_call(0, x, w.detach(), operand0=b.requires_grad_()) == "node"
    assert module._kgen_part_call(0, x.half(), w.half(), operand0=b.half()) == "node"
    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    assert module._kgen_part_call(0, x, w, operand0=b) == "function"
    monkeypatch.delenv("KGEN_PYTHON_AUTOGRAD")
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
    assert module._kgen_part_call(0, fake, w.detach(), operand0=b.detach()) == "op"
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recording(TorchDispatchMode):   # make_fx and FlopCounterMode are such modes
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Recording():
        assert module._kgen_part_call(0, x, w.detach(), operand0=b.detach()) == "op"
    with Recording():
        assert module._kgen_part_call(0, x, w, operand0=b) == "op"
    monkeypatch.setattr(module, "_KGEN_AUTOGRAD", (None,))   # no backward kernels: the op's backward raises
    assert module._kgen_part_call(0, x, w, operand0=b) == "op"
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert module._kgen_part_call(0, x, w.detach(), operand0=b.detach()) == "op"
    forward = generator.render(SPECS[0])
    forward = forward[forward.index("class ModelNew"):]
    assert "_kgen_part_call(0, x, w" in forward and "_KGEN_OPS[" not in forward


def _stub_kernels(monkeypatch, module, launches):
    """CPU stand-ins for a part's forward and backward kernels (z = x w^T, out = 2 z; the
    backward's dz = 2 g, and 1 as the first operand's column sums): what the Python around
    the kernels does with their results is then checked without a GPU. A BatchNorm part's
    running mean gets + 1 in place, as the kernels update it (conftest.stand_in_launch)."""

    def launch_backward(part, g, x, w, z, need_dx, need_dw, need_dinput, bn_training, input_operand=None, **operands):
        launches.append("backward")
        dz = 2 * g
        column_grads = torch.cat([torch.ones(len(operands), w.shape[0]), torch.zeros(2, w.shape[0])])
        return dz @ w, dz.t() @ x, column_grads, x.new_empty(0)

    monkeypatch.setattr(module, "_kgen_launch", stand_in_launch(module, launches))
    monkeypatch.setattr(module, "_kgen_launch_backward", launch_backward)


@pytest.mark.parametrize("problem", ["gemm_scale_bn", str(REFS_DIR / "gemm_mul_leakyrelu.py")],
                         ids=lambda p: p.rsplit("/", 1)[-1])
def test_eager_training_runs_the_ops_formula_without_its_dispatch(monkeypatch, problem):
    """The autograd.Function of eager training: the part's body in the forward, the op's own
    save and vjp, the backward kernels' body called directly (never the backward op), the
    gradients the kernels give for x, w and the operands; a BatchNorm's running buffers updated
    in place by the kernels and marked dirty (the same tensor, its version moved); the backward
    is not differentiable again (create_graph raises instead of giving wrong second
    derivatives). (KGEN_PYTHON_AUTOGRAD=1: the C++ node's, test_native_backward.)"""
    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    spec = Spec.of(problem, 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA)
    module = exec_file(generator.render(spec))
    launches = []
    _stub_kernels(monkeypatch, module, launches)
    monkeypatch.setattr(module, "_KGEN_BACKWARD_OPS", (None,))     # the op must not be reached
    low = generator.lowered_parts(spec)[0]
    x = torch.rand(6, 4, requires_grad=True)
    w = torch.rand(5, 4, requires_grad=True)
    args = {name: (torch.rand((1,) if node.level == "scalar" else (5,), requires_grad=True) if node.kind != "mask" else None)
            for name, node in ((f"operand{k}", node) for k, node in enumerate(low.operands))}
    if low.batchnorm:
        running_mean, running_var = torch.zeros(5), torch.ones(5)
        args.update(training=1, gamma=torch.ones(5, requires_grad=True), beta=torch.zeros(5, requires_grad=True),
                    running_mean=running_mean, running_var=running_var, num_batches_tracked=None,
                    momentum=0.1, cumulative=0, eps=1e-5)
        version = running_mean._version
    else:
        args.update(training=0)
    result = module._kgen_part_call(0, x, w, **args, autocast=0, keep_z=1)
    out, kept = result[0], result[1]
    assert launches == ["forward"]
    assert torch.allclose(out, 2 * (x @ w.t()).detach()) and out.requires_grad and not kept.requires_grad
    if low.batchnorm:
        assert result[2] is running_mean and result[3] is running_var       # in place, no copy to store
        assert torch.equal(running_mean, torch.ones(5)) and running_mean._version > version
        assert not running_mean.requires_grad
    g = torch.rand_like(out)
    grads = torch.autograd.grad(out, [x, w, args["operand0"]], g, retain_graph=True)
    assert launches == ["forward", "backward"]
    assert torch.allclose(grads[0], 2 * g @ w.detach()) and torch.allclose(grads[1], 2 * g.t() @ x.detach())
    assert torch.equal(grads[2], torch.ones_like(args["operand0"]))
    gx, = torch.autograd.grad(out, [x], g.requires_grad_(), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()


@pytest.mark.parametrize("kept", [True, False], ids=["z kept", "no z"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_backward_ops_results_alias_nothing(monkeypatch, dtype, kept):
    """A custom op's results may alias neither its inputs nor each other (torch checks it on
    every real call, not on fake tensors): _kgen_launch_backward, the backward op's body, run on
    the CPU with the library stubbed (the kernels write nothing), gives results that pass
    torch's own check, for an fp32 module (kgen's GEMMs) and a bf16 one (torch's, or with no z
    kept kgen's on fp32 copies), and in the module's dtype, as the op's fake says."""
    spec = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA)
    module = exec_file(generator.render(spec))

    class Library:   # (hashable, as a ctypes library is: the file keys its workspace sizes by it)
        kgen_backward_floats_0 = staticmethod(lambda M, N, K, g_numel: 1)
        kgen_backward_0 = staticmethod(lambda *values: None)

    library = Library()
    monkeypatch.setattr(module, "_kgen_build", lambda device=None, dtype=None, autocast=False, fp32_weight=False: library)
    monkeypatch.setattr(module, "_kgen_on", lambda device: module._KGEN_NO_GUARD)
    monkeypatch.setattr(module, "_kgen_stream", lambda device: 0)
    x, w = torch.rand(6, 4, dtype=dtype), torch.rand(5, 4, dtype=dtype)
    operands = {"operand0": torch.rand(5, dtype=dtype), "operand1": torch.rand(1, dtype=dtype)}
    g, z = torch.rand(6, 5, dtype=dtype), torch.zeros(6 * 5 + 5 * 5 if kept else 0)
    inputs = (g, x, w, *operands.values(), z)
    result = module._kgen_launch_backward(0, g, x, w, z, 1, 1, 0, 1, **operands)
    assert len(result) == 4 and all(t.dtype == dtype for t in result)
    assert result[2].shape == (len(operands) + 2, 5)      # the column sums and BatchNorm's (dβ, dγ)
    assert not torch._C._any_output_is_alias_to_input_or_output(inputs, {}, result)


def test_an_edited_kernel_gets_ops_of_its_own():
    """The op namespace hashes the CUDA source: a file whose kernel was edited must not reuse
    the ops (and so the library) an earlier execution of the original registered."""
    text = generator.render(SPECS[0])
    edited = text.replace("namespace kgen_part0 {", "namespace kgen_part0 {  // edited", 1)
    assert edited != text
    assert exec_file(edited)._KGEN_OP_NAMESPACE != exec_file(text)._KGEN_OP_NAMESPACE
    assert exec_file(text, "again")._KGEN_OP_NAMESPACE == exec_file(text)._KGEN_OP_NAMESPACE


def test_backward_traces_with_fake_kernels():
    """What AOTAutograd does when torch.compile meets inputs that require grad: the backward
    runs on fake tensors and must give gradients of the inputs' shapes (on CUDA its real kernel
    raises, see the GPU test): no error at compile time, and no gradient a compiler could drop."""
    spec = SPECS[0]
    module = exec_file(generator.render(spec))
    n = generator.lowered_parts(spec)[0].graph.out_features
    x = torch.empty(64, 128, device="meta", requires_grad=True)
    args = meta_args(module, 0, x, n)
    args["w"].requires_grad_(True)
    out = module._KGEN_OPS[0](**args)
    out = out[0] if isinstance(out, tuple) else out
    grad_x, grad_w = torch.autograd.grad(out.sum(), [x, args["w"]])
    assert grad_x.shape == x.shape and grad_w.shape == args["w"].shape


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.problem_name)
def test_backward_ops_and_their_fake_kernels(spec):
    """Every part has either backward kernels (a backward op whose fake kernel gives the
    gradients' shapes, wired as the forward op's autograd), gradients of zero with no kernels (a
    constant output), or a reason that names the op it lacks; through the fake kernels, backward
    gives each input and parameter a gradient of its shape."""
    from kgen.lower import backward

    module = exec_file(generator.render(spec))
    parts = generator.lowered_parts(spec)
    for k, low in enumerate(parts):
        reason = backward.unsupported(low)
        assert (module._KGEN_BACKWARD_OPS[k] is None) == (reason is not None)
        assert (module._KGEN_BACKWARD_ARGS[k] is None) == (not backward.has_kernels(low))
        if reason is not None:
            assert "yet" in reason
    low = parts[0]
    n = low.graph.out_features
    x = torch.empty(64, 128, device="meta", requires_grad=True)
    args = meta_args(module, 0, x, n, low)
    leaves = [x] + [t.requires_grad_() for name, t in args.items()
                    if isinstance(t, torch.Tensor) and name != "x"
                    and (name in ("w", "gamma", "beta") or name.startswith("operand"))]
    out = module._KGEN_OPS[0](**args)
    out = out[0] if isinstance(out, tuple) else out
    grads = torch.autograd.grad(out.sum(), leaves, allow_unused=True)
    # Dropout's masks are drawn, not learned: torch sends them no gradient, nor does kgen.
    masks = [args[f"operand{k}"] for k, n in enumerate(low.operands) if n.kind == "mask"]
    for leaf, grad in zip(leaves, grads):
        if any(leaf is m for m in masks):
            assert grad is None
        elif module._KGEN_BACKWARD_OPS[0] is not None or leaf is x or leaf is args["w"]:
            assert grad is not None and grad.shape == leaf.shape


SCALED_ROW_SUM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.linear(x).sum(dim=1, keepdim=True) * self.gain


def get_inputs():
    return [torch.rand(64, 128)]


def get_init_inputs():
    return [128, 1024]
"""


def test_unsupported_parts_name_the_op(tmp_path):
    from kgen.lower import backward

    # The matrix-vector rewrite has backward kernels (kernels/gemv_backward.cuh), but for a
    # parameter read after its row sum: then backward() raises, naming it.
    rewritten = Spec.of(str(REFS_DIR / "gemm_sum_max_mean_lse.py"), 64, 128, 1024, math="fp32_simt",
                        backend="gemv", fusion=1)
    assert backward.unsupported(generator.lowered(rewritten)) is None
    assert "\nbackward:  kgen kernels (each row sum's gradient;" in generator.render_header(rewritten, None)
    (tmp_path / "scaled.py").write_text(SCALED_ROW_SUM)
    scaled = Spec.of(str(tmp_path / "scaled.py"), 64, 128, 1024, math="fp32_simt", backend="gemv", fusion=1)
    reason = backward.unsupported(generator.lowered(scaled))
    assert "a parameter read after the matrix-vector rewrite's row sum (line 13" in reason, reason
    assert reason.endswith("; train with the reference module")
    # A cuBLAS variant's backward runs the same kernels, its GEMMs on cuBLAS (issue 24).
    for math in ("tf32", "bf16", "fp32_simt"):
        for ref in ("gemm_mul_leakyrelu", "gemm_scale_bn", "gemm_groupnorm_min_bias"):
            cublas = Spec.of(str(REFS_DIR / f"{ref}.py") if ref != "gemm_scale_bn" else ref, 64, 128, 1024,
                             math=math, backend="cublas", fusion=1)
            assert backward.unsupported(generator.lowered(cublas)) is None, (ref, math)
            assert "\nbackward:  kgen kernels" in generator.render_header(cublas, None)
    # (A broadcast tail has backward kernels: tests/test_tail_backward.py.)
    for ref in ("gemm_mul_leakyrelu.py", "matmul_gelu_softmax.py", "gemm_groupnorm_hardtanh.py",
                "gemm_maxpool_sum_scale.py", "gemm_groupnorm_min_bias.py"):
        supported = Spec.of(str(REFS_DIR / ref), 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=1, tile=WGMMA)
        assert backward.unsupported(generator.lowered(supported)) is None
    bn = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=2, tile=WGMMA)
    assert backward.unsupported(generator.lowered(bn)) is None
    # The header says it, one line.
    assert "\nbackward:  kgen kernels" in generator.render_header(bn, None)
    assert "\nbackward:  raises at backward() (no backward kernel yet for a parameter read after the " \
        "matrix-vector rewrite's row sum" in generator.render_header(scaled, None)


def test_running_statistics_carry_no_autograd_history():
    """A BatchNorm part's op returns the updated running statistics; stored into the buffers,
    they must not make the buffers part of the autograd graph (nor keep it alive)."""
    spec = next(s for s in SPECS if s.problem == "gemm_scale_bn")
    module = exec_file(generator.render(spec))
    x = torch.empty(64, 128, device="meta", requires_grad=True)
    out, kept, running_mean, running_var = module._KGEN_OPS[0](**meta_args(module, 0, x, 1024))
    assert out.requires_grad and not kept.requires_grad
    # z and BatchNorm's per-column values, kept for the backward
    assert kept.shape == (64 * 1024 + 5 * 1024,)
    assert not running_mean.requires_grad and not running_var.requires_grad


def test_forward_reads_no_data_pointer():
    """torch.compile cannot trace data_ptr(): alignment is the op's business (_kgen_launch), not
    the checks forward runs."""
    source = generator.render(SPECS[0])
    body = source[source.index("class ModelNew"):]
    helpers = source[source.index("def _kgen_checked_input"):source.index("def _kgen_launch")]
    assert "data_ptr" not in body and "data_ptr" not in helpers


# ---- GPU -------------------------------------------------------------------------------------
GPU_REFS = ["gemm_scale_bn", "gemm_bn_scale_softmax", str(REFS_DIR / "gemm_sigmoid_gemm_lse.py"),
            str(REFS_DIR / "gemm_groupnorm_hardtanh.py"), str(REFS_DIR / "gemm_groupnorm_min_bias.py")]


@pytest.mark.gpu
@pytest.mark.parametrize("problem", GPU_REFS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_compile_fullgraph_and_cuda_graph_capture(problem, tmp_path):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma GEMM needs sm_90a")
    from kgen.frontend.problems import load

    shape = (257, 300, 1536)
    spec = Spec.of(problem, *shape, math="tf32x3", backend="wgmma", fusion=2, tile=WGMMA)
    module = exec_file(generator.render(spec))
    ref = load(problem, *shape)
    torch.manual_seed(0)
    model = module.ModelNew(*ref.init_args()).cuda()
    twin = copy.deepcopy(model)
    x = torch.rand(257, 300, device="cuda")
    expect = model(x)
    compiled = torch.compile(twin, fullgraph=True)
    got = compiled(x)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    # A CUDA graph of the forward replays it (warm first: the extension is built and loaded).
    static_x = x.clone()
    graph_model = copy.deepcopy(model).eval()
    graph_model(static_x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = graph_model(static_x)
    static_x.copy_(torch.rand(257, 300, device="cuda"))
    graph.replay()
    torch.testing.assert_close(static_out, graph_model(static_x), rtol=0, atol=0)
    loss = model(x).sum()
    if any(op is None for op in module._KGEN_BACKWARD_OPS):
        # A part without backward kernels: backward() says so.
        with pytest.raises(RuntimeError, match="kgen: this ModelNew has no backward"):
            loss.backward()
        return
    check_training_step_compiles_and_captures(model, x)


@pytest.mark.gpu
@pytest.mark.parametrize("problem, fusion", [("gemm_scale_bn", 2), (str(REFS_DIR / "gemm_sigmoid_gemm_lse.py"), 0)],
                         ids=["batchnorm", "chain at fusion 0"])
def test_a_bf16_module_compiles_and_captures_a_training_step(problem, fusion):
    """A bf16 module: its forward reads the parameters and updates BatchNorm's buffers in bf16,
    fusion 0 runs a chain in a kernel of its own, and its backward's GEMMs run on torch's GEMM
    in bf16 inside the backward op; under torch.compile(fullgraph=True) and in a CUDA graph a
    training step still gives what eager ModelNew gives, bit for bit."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma GEMM needs sm_90a")
    from kgen.frontend.problems import load

    shape = (257, 296, 1536)   # in_features a multiple of 8: 16-bit rows for TMA
    spec = Spec.of(problem, *shape, math="tf32x3", backend="wgmma", fusion=fusion, tile=WGMMA)
    module = exec_file(generator.render(spec))
    torch.manual_seed(0)
    model = module.ModelNew(*load(problem, *shape).init_args()).cuda().to(torch.bfloat16)
    x = torch.rand(257, 296, device="cuda").to(torch.bfloat16)
    check_training_step_compiles_and_captures(model, x)


@pytest.mark.gpu
@pytest.mark.parametrize("problem", ["gemm_scale_bn", str(REFS_DIR / "gemm_groupnorm_min_bias.py"),
                                     str(REFS_DIR / "gemm_sigmoid_gemm_lse.py")],
                         ids=lambda p: p.rsplit("/", 1)[-1])
def test_an_fp32_module_under_autocast_compiles_and_captures(problem):
    """Inside torch.autocast an fp32 module runs the build for autocast (its output fp32 where
    eager's is: the forward passes the op that decision, which its fake kernel reads); under
    torch.compile(fullgraph=True) and in a CUDA graph its forward and a training step give what
    eager ModelNew gives there, bit for bit, and the output's dtype is eager's."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma GEMM needs sm_90a")
    from kgen.frontend.problems import load

    shape = (257, 296, 1536)
    # (A tile no other test here renders: an op another test registered in this process from the
    # same CUDA source would run that module's Python, whose _KGEN_BUILT this test does not read.)
    tile = Tile(128, 128, 32, 16, 128, stages=3)
    spec = Spec.of(problem, *shape, math="tf32x3", backend="wgmma", fusion=2, tile=tile)
    module = exec_file(generator.render(spec))
    ref = load(problem, *shape)
    torch.manual_seed(0)
    model = module.ModelNew(*ref.init_args()).cuda()
    x = torch.rand(257, 296, device="cuda")
    with torch.autocast("cuda", torch.bfloat16):
        expect = model(x)
        got = torch.compile(copy.deepcopy(model), fullgraph=True)(x)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    assert got.dtype == expect.dtype
    # In inference its weight stays fp32 (the build whose GEMM rounds it: _KGEN_FP32_WEIGHT),
    # compiled as in eager.
    assert module._KGEN_FP32_WEIGHT
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
        expect = model(x)
        module._KGEN_BUILT.clear()   # (what the compiled graph's op asks for, alone)
        got = torch.compile(copy.deepcopy(model), fullgraph=True)(x)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    assert [(dtype, autocast, fp32_weight) for _, dtype, _, autocast, fp32_weight in module._KGEN_BUILT] == [
        (torch.bfloat16, True, True)]
    check_training_step_compiles_and_captures(model, x, autocast=torch.bfloat16)


def check_training_step_compiles_and_captures(model, x, autocast=None):
    """A training step (forward, backward, SGD) of ModelNew, as is, under
    torch.compile(fullgraph=True) and captured in a CUDA graph, gives what eager ModelNew gives,
    bit for bit (the same kernels run); inside torch.autocast of dtype `autocast` where given."""
    region = (lambda: torch.autocast("cuda", autocast)) if autocast is not None else contextlib.nullcontext
    with region():
        g = torch.randn_like(model(x))

    def step(m, opt, inp):
        opt.zero_grad(set_to_none=True)
        with region():
            loss = (m(inp) * g).sum()
        loss.backward()
        opt.step()
        return loss

    def params_of(m):
        return [p.detach().clone() for p in m.parameters()] + [b.clone() for b in m.buffers()]

    eager, compiled_model, graphed = (copy.deepcopy(model) for _ in range(3))
    opts = [torch.optim.SGD(m.parameters(), lr=0.01) for m in (eager, compiled_model, graphed)]
    compiled = torch.compile(compiled_model, fullgraph=True)
    for _ in range(2):
        step(eager, opts[0], x)
        step(compiled, opts[1], x)
    for a, b in zip(params_of(eager), params_of(compiled_model)):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    # CUDA graph: warm up on a side stream (torch's recipe), capture one step, replay it twice.
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(graphed, opts[2], static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(graphed, opts[2], static_x)
    for _ in range(2):
        graph.replay()
    # eager: 2 steps so far; graphed: 2 warm-up steps, 1 captured (which ran no kernels) and 2 replays
    for _ in range(2):
        step(eager, opts[0], x)
    torch.cuda.synchronize()
    for a, b in zip(params_of(eager), params_of(graphed)):
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_a_constant_output_trains_with_zero_gradients(monkeypatch):
    """A module whose output a rewrite made a constant (KernelBench 80's kind: max over the
    features, minus its own mean) has gradients of zero, as torch's for finite values: its file's
    backward returns them with no kernel (eager training's autograd.Function, on CPU tensors with
    the library stood in), keeps no z, and says so in its header; every other part's file is
    unchanged by it (no zero backward in it)."""
    from conftest import launch_on_cpu

    ref = str(REFS_DIR / "gemm_max_sub_gelu.py")
    spec = next(s for s in enumerate_specs(ref, 64, 96, 80) if s.family == "simt")
    text = generator.render(spec)
    assert "\nbackward:  zeros: the output is a constant" in text
    module = exec_file(text)
    launch_on_cpu(module, monkeypatch)
    monkeypatch.setattr(module, "_kgen_checked_input", lambda x, weight: x)   # (its CUDA check)
    model = module.ModelNew(*module.get_init_inputs())
    x = torch.rand(64, 96, requires_grad=True)
    model(x).sum().backward()
    grads = [x.grad] + [p.grad for p in model.parameters()]
    assert all(g is not None and g.shape == t.shape and not g.any() for g, t in zip(grads, [x, *model.parameters()]))
    other = next(s for s in enumerate_specs(str(REFS_DIR / "gemm_mul_leakyrelu.py"), 64, 96, 80) if s.family == "simt")
    assert "def _kgen_zero_vjp" not in generator.render(other)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("ref,backend", [("gemm_mul_leakyrelu", "wgmma"), ("gemm_sum_max_mean_lse", "gemv")])
def test_the_backwards_python_calls_its_entry_with_every_argument(ref, backend, dtype, monkeypatch):
    """The Python around the backward kernels (_kgen_launch_backward: the GEMM families' and the
    matrix-vector rewrite's) run in eager training on CPU tensors, the library stood in: one call
    of the part's backward entry, every pointer it names given (g, z, dx, dw, the workspace, the
    column sums), its sizes the module's, and gradients of the inputs' shapes and dtype back (in
    bf16, the GEMM families' dx and dW from torch's GEMMs on dz: 16-bit dx, dW are not the kernels')."""
    from conftest import launch_on_cpu

    spec = next(s for s in enumerate_specs(str(REFS_DIR / f"{ref}.py"), 64, 96, 80) if s.family == backend)
    module = exec_file(generator.render(spec))
    library = launch_on_cpu(module, monkeypatch)
    built = []   # the dtypes of the builds asked for
    monkeypatch.setattr(module, "_kgen_build", lambda device=None, dtype=torch.float32, autocast=False, fp32_weight=False: built.append(dtype) or library)
    monkeypatch.setattr(module, "_kgen_checked_input", lambda x, weight: x)   # (its CUDA check)
    # the Python node's vjp (a bf16 module's eager training runs the C++ node, which calls the
    # same entry: test_native_backward.py)
    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    model = module.ModelNew(*module.get_init_inputs()).to(dtype)
    x = torch.rand(64, 96, dtype=dtype, requires_grad=True)
    out = model(x)
    out.float().sum().backward()
    assert len(library.calls) == 1 and library.calls[0]["z_out"]     # the forward kept what the backward reads
    (call,) = library.backward_calls
    torch_gemms = backend != "gemv" and dtype != torch.float32
    assert (call["M"], call["N"], call["K"], call["need_dx"], call["need_dw"]) == (64, 80, 96, *[int(not torch_gemms)] * 2)
    assert all(call[name] for name in ("x", "w", "g", "z", "grad_cols", "workspace"))
    assert bool(call["dx"]) == bool(call["dw"]) == (not torch_gemms)
    # torch's GEMMs read dz, which the entry writes in the module's dtype; g goes as it is
    assert bool(call["dz_out"]) == torch_gemms and call["g_numel"] == out.numel()
    for leaf in (x, *model.parameters()):
        assert leaf.grad is not None and leaf.grad.shape == leaf.shape and leaf.grad.dtype == leaf.dtype
    # a 16-bit module's backward kernels come from its own build (they read its parameters in
    # their dtype), as its forward's do
    assert built == [dtype, dtype]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name())
def test_the_backward_entry_zeroes_every_row_of_the_column_sums(spec):
    """kgen_backward_<k> zeroes (and a 16-bit build converts) the column sums as many rows as the
    part's operands plus BatchNorm's two (entry_backward.cuh, backward_with_io; the Python
    allocates them with torch.empty), the [P + 2][N] the Python allocates and the op's fake
    returns; kgen_backward_floats_<k> makes room for as many."""
    import re

    source = generator.render(spec)
    for k, args in enumerate(exec_file(source)._KGEN_BACKWARD_ARGS):
        if args is None:
            continue
        params = sum(name.startswith("operand") for name, _ in args)
        floats = source[source.index(f"KGEN_EXPORT long long kgen_backward_floats_{k}("):]
        rows = re.search(r"backward_io_floats<[^>]*>\(M, N, K, g_numel, (\d+)\);", floats[:floats.index("}")])
        assert rows and int(rows.group(1)) == params + 2
        entry = source[source.index(f"KGEN_EXPORT const char* kgen_backward_{k}("):]
        rows = re.search(r"backward_with_io<[^>]*>\(\s*x, w, g, g_numel, z, M, N, K, p, workspace, dx, dw, grad_cols, (\d+), dz_out,",
                         entry[:entry.index("return message;")])
        assert rows and int(rows.group(1)) == params + 2
        fake = source[source.index(f"def _kgen_part{k}_backward_fake("):]
        assert f"x.new_empty({params} + 2, N, dtype=torch.float32 if autocast else x.dtype)" in fake[:fake.index("\n\n\n")]


def test_an_ops_body_and_fake_take_the_build_from_its_autocast_argument(monkeypatch):
    """A compiled graph runs a part's op with autocast off (AOTAutograd traced autocast into the
    graph): the op's body builds, and its fake kernel types the output, from the op's `autocast`
    argument, which the forward sets where autocast's state is the caller's, never from autocast's
    state where the body runs (session 43: under torch.compile the plain 16-bit build ran)."""
    from conftest import launch_on_cpu

    spec = next(s for s in enumerate_specs(str(REFS_DIR / "gemm_groupnorm_hardtanh.py"), 64, 96, 80)
                if s.family == "wgmma")
    module = exec_file(generator.render(spec))
    assert module._KGEN_AUTOCAST_FP32_OUTPUT   # (its output is fp32 under autocast: GroupNorm's)
    library = launch_on_cpu(module, monkeypatch)
    built = []
    monkeypatch.setattr(module, "_kgen_build",
                        lambda device=None, dtype=torch.float32, autocast=False, fp32_weight=False: built.append(autocast) or library)
    x, w = torch.rand(64, 96).to(torch.bfloat16), torch.rand(80, 96).to(torch.bfloat16)
    assert not torch.is_autocast_enabled("cuda")
    args = {"training": 0, **{name: torch.rand(80) for name, _ in module._KGEN_FORWARD_ARGS[0] if name.startswith("operand")}}
    for autocast in (1, 0):
        module._KGEN_IMPLS[0](x, w, **args, autocast=autocast, keep_z=0)
        assert built[-1] == bool(autocast)
        fake = module._kgen_part0_fake(x.to("meta"), w.to("meta"), *(v.to("meta") if isinstance(v, torch.Tensor) else v
                                                                      for v in args.values()), autocast, 0)
        assert fake[0].dtype == (torch.float32 if autocast else torch.bfloat16)
