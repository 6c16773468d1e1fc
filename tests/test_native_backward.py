"""The C++ autograd node of a bf16 / fp16 module's eager training (kernels/native_backward.cpp).

CPU: the node is built with torch's headers, as ModelNew builds it, and run with the kernels
stubbed on the host: a stand-in kgen_backward_<part> compiled with g++ (its arguments, by name,
from the file's own _KGEN_BACKWARD_ARGS), which writes dz = 2 g and distinct column sums, and
records every argument the node gave it. Checked: each argument of the C entry is what the
Python vjp passes (the same stand-in, called through ctypes), the gradients of x, w, the
operands and BatchNorm's γ and β are the Python node's bit for bit, only the gradients asked for
are returned, the kernels' error reaches backward() as a RuntimeError, a second derivative is
refused, and a BatchNorm's running buffers count their in-place update. The GPU tier runs the
real kernels through both nodes (tests/test_half_gpu.py).
"""

import contextlib
import ctypes
import shutil
import subprocess

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

from conftest import REFS_DIR, SYNTHESIZED_REFS, stand_in_launch
from test_render import exec_file

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
WGMMA = Tile(128, 128, 32, 16, 128, stages=4)
M, K, N = 6, 8, 16
FAIL_NUMEL = 7 * N    # the stand-in fails for a gradient of this many elements


def test_the_plans_codes_are_the_nodes_own():
    """Every parameter of a backward entry has a source in the C++ node, and the plan's codes are
    read from its enums (one place)."""
    codes = generator.native_codes()
    assert set(generator.NATIVE_SOURCES) == {name for name, _ in generator.BACKWARD_BASE_ARGS}
    assert set(generator.NATIVE_SOURCES.values()) <= set(codes["Source"]) and "Saved" in codes["Source"]
    assert set(generator.NATIVE_GRADS.values()) | {"None"} == set(codes["Grad"])
    assert len(set(codes["Source"].values())) == len(codes["Source"])


def test_every_file_with_backward_kernels_carries_the_node():
    """An fp32-only file's training runs the node too (its entry computes dx and dW); the
    matrix-vector rewrite's, whose entry computes outer products the node does not know, does not."""
    fp32_only = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="kgen", fusion=1,
                         tile=Tile(128, 128, 32, 64, 32, stages=4), arch="sm_80")
    assert not generator.sixteen_bit_builds(fp32_only)
    module = exec_file(generator.render(fp32_only))
    assert module._KGEN_NATIVE_PLANS[0] is not None and "kgen_backward_packed_0" in module._KGEN_CUDA_SOURCE
    gemv = Spec.of(str(REFS_DIR / "gemm_sum_max_mean_lse.py"), 64, 128, 1024, math="fp32_simt", backend="gemv", fusion=1)
    assert "_KGEN_NATIVE" not in generator.render(gemv)


def _stand_in_library(module, tmp_path):
    """The stand-in kernels' library: kgen_backward_0 (with the file's argument list) and its
    packed form, kgen_backward_floats_0, and `seen`, the last call's arguments."""
    names = [name for name, _ in module._KGEN_BACKWARD_ARGS[0]]
    ctype = {ctypes.c_void_p: "void*", ctypes.c_int: "int", ctypes.c_longlong: "long long"}
    params = ", ".join(f"{ctype[t]} {name}" for name, t in module._KGEN_BACKWARD_ARGS[0])
    at = {name: k for k, name in enumerate(names)}
    operands = [name for name in names if name.startswith("operand")]
    source = f"""
#include <cstdint>
#include <cstring>
static float from_bf16(uint16_t h) {{ uint32_t u = uint32_t(h) << 16; float f; std::memcpy(&f, &u, 4); return f; }}
static uint16_t to_bf16(float f) {{ uint32_t u; std::memcpy(&u, &f, 4); return uint16_t(u >> 16); }}
extern "C" long long seen[{len(names)}];
long long seen[{len(names)}];
// 1: the column sums are fp32 (the build for torch.autocast's), else bf16 (the test sets it)
extern "C" int cols_fp32;
int cols_fp32 = 0;
// the floats of d_input, the inputs' gradients one after another (the test sets it): the stand-in
// writes i + 0.25 (mod 251) at float i, where the entry is handed one
extern "C" long long d_input_floats;
long long d_input_floats = 0;
extern "C" long long kgen_backward_floats_0(int M, int N, int K, long long g_numel) {{ return 5 + M; }}
extern "C" const char* kgen_backward_packed_0(const long long* a) {{
  std::memcpy(seen, a, sizeof seen);
  const long long M = a[{at['M']}], N = a[{at['N']}], K = a[{at['K']}];
  if (a[{at['g_numel']}] == {FAIL_NUMEL}) return "the stand-in's failure";
  float* d_input = reinterpret_cast<float*>(a[{at['d_input']}]);
  for (long long i = 0; d_input != nullptr && i < d_input_floats; ++i) d_input[i] = float(i % 251) + 0.25f;
  if (a[{at['dz_out']}] == 0) {{
    // an fp32 module's entry: dz = 2 g, dx = dz w and dW = dz^T x where asked for (sums in double)
    const float* g = reinterpret_cast<const float*>(a[{at['g']}]);
    const float* x = reinterpret_cast<const float*>(a[{at['x']}]);
    const float* w = reinterpret_cast<const float*>(a[{at['w']}]);
    float* dx = reinterpret_cast<float*>(a[{at['dx']}]);
    float* dw = reinterpret_cast<float*>(a[{at['dw']}]);
    for (long long m = 0; a[{at['need_dx']}] && m < M; ++m)
      for (long long k = 0; k < K; ++k) {{
        double s = 0;
        for (long long n = 0; n < N; ++n) s += 2.0 * g[m * N + n] * w[n * K + k];
        dx[m * K + k] = float(s);
      }}
    for (long long n = 0; a[{at['need_dw']}] && n < N; ++n)
      for (long long k = 0; k < K; ++k) {{
        double s = 0;
        for (long long m = 0; m < M; ++m) s += 2.0 * g[m * N + n] * x[m * K + k];
        dw[n * K + k] = float(s);
      }}
    float* cols = reinterpret_cast<float*>(a[{at['grad_cols']}]);
    for (long long r = 0; r < {len(operands) + 2}; ++r)
      for (long long n = 0; n < N; ++n) cols[r * N + n] = float(r + 1) + 0.5f * float(n % 4);
    return nullptr;
  }}
  const uint16_t* g = reinterpret_cast<const uint16_t*>(a[{at['g']}]);
  uint16_t* dz = reinterpret_cast<uint16_t*>(a[{at['dz_out']}]);
  uint16_t* cols = reinterpret_cast<uint16_t*>(a[{at['grad_cols']}]);
  float* cols32 = reinterpret_cast<float*>(a[{at['grad_cols']}]);
  for (long long i = 0; i < M * N; ++i) dz[i] = to_bf16(2.0f * from_bf16(g[i]));
  for (long long r = 0; r < {len(operands) + 2}; ++r)
    for (long long n = 0; n < N; ++n) {{
      const float v = float(r + 1) + 0.5f * float(n % 4);
      if (cols_fp32) cols32[r * N + n] = v; else cols[r * N + n] = to_bf16(v);
    }}
  return nullptr;
}}
extern "C" const char* kgen_backward_0({params}) {{
  const long long a[] = {{{", ".join(f"(long long) {n}" for n in names)}}};
  return kgen_backward_packed_0(a);
}}
"""
    (tmp_path / "stand_in.cpp").write_text(source)
    subprocess.run([GXX, "-O1", "-shared", "-fPIC", str(tmp_path / "stand_in.cpp"), "-o", str(tmp_path / "stand_in.so")],
                   check=True, capture_output=True, text=True)
    library = ctypes.CDLL(str(tmp_path / "stand_in.so"))
    library.kgen_backward_0.argtypes = [t for _, t in module._KGEN_BACKWARD_ARGS[0]]
    library.kgen_backward_0.restype = ctypes.c_char_p
    library.kgen_backward_floats_0.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_longlong]
    library.kgen_backward_floats_0.restype = ctypes.c_longlong
    return library, names, (ctypes.c_longlong * len(names)).in_dll(library, "seen")


@pytest.fixture(scope="module")
def file_and_library(tmp_path_factory):
    """gemm_scale_bn's file (operands, BatchNorm's γ and β) with the stand-in kernels; the C++ node
    built once for the module's tests (~15 s on two cores)."""
    spec = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=2, tile=WGMMA)
    module = exec_file(generator.render(spec))
    assert module._KGEN_NATIVE_PLANS[0] is not None
    library, names, seen = _stand_in_library(module, tmp_path_factory.mktemp("stand_in"))
    module._kgen_native_module()
    return module, library, names, seen


def _stub(monkeypatch, module, library):
    """The forward's kernels as test_custom_ops stubs them (z = x w^T kept, out = 2 z, the running
    mean + 1 in place); the build, stream and device guard of a GPU as host stand-ins."""

    monkeypatch.setattr(module, "_kgen_launch", stand_in_launch(module))
    monkeypatch.setattr(module, "_kgen_build", lambda device=None, dtype=None, autocast=False, fp32_weight=False: library)
    monkeypatch.setattr(module, "_kgen_stream", lambda device: 4242)
    monkeypatch.setattr(module, "_kgen_on", lambda device: contextlib.nullcontext())


def _inputs(module, requires=("x", "w", "operand0", "gamma", "beta"), dtype=torch.bfloat16, rows=M, autocast=0):
    """The part's op arguments: x and w in `dtype`, the parameters and buffers too, but in fp32
    for the build for torch.autocast (`autocast`)."""
    gen = torch.Generator().manual_seed(0)
    param_dtype = torch.float32 if autocast else dtype

    def t(*shape, name):
        return torch.randn(*shape, generator=gen).to(dtype if name in ("x", "w") else param_dtype).requires_grad_(
            name in requires)

    args = {"x": t(rows, K, name="x"), "w": t(N, K, name="w")}
    for name, ctype in module._KGEN_FORWARD_ARGS[0]:
        if name.startswith("operand"):
            args[name] = t(N, name=name)
    args.update(training=1, gamma=t(N, name="gamma"), beta=t(N, name="beta"),
                running_mean=torch.zeros(N, dtype=param_dtype), running_var=torch.ones(N, dtype=param_dtype),
                num_batches_tracked=None, momentum=0.1, cumulative=0, eps=1e-5, autocast=autocast, keep_z=1)
    return args


def _gradients(module, args, g):
    args = dict(args)
    x, w = args.pop("x"), args.pop("w")
    result = module._kgen_part_call(0, x, w, **args)
    leaves = {name: t for name, t in dict(args, x=x, w=w).items() if isinstance(t, torch.Tensor) and t.requires_grad}
    grads = torch.autograd.grad(result[0], list(leaves.values()), g, allow_unused=True)
    return result, dict(zip(leaves, grads))


@pytest.mark.parametrize("autocast", [0, 1], ids=["module dtype", "autocast build"])
def test_the_node_passes_what_the_python_vjp_passes_and_gives_its_gradients(monkeypatch, file_and_library, autocast):
    """The C++ node and the Python vjp call the entry alike and give the same gradients, in the
    dtype of each input: the parameters' in fp32 from the build for torch.autocast, whose
    kernels write the column sums in fp32 (kernels/common.cuh, Param)."""
    module, library, names, seen = file_and_library
    _stub(monkeypatch, module, library)
    monkeypatch.setattr(ctypes.c_int.in_dll(library, "cols_fp32"), "value", autocast)
    args = _inputs(module, autocast=autocast)
    g = torch.randn(M, N, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)

    version = args["running_mean"]._version
    result, native = _gradients(module, args, g)
    assert "PartNode" in result[0].grad_fn.name(), result[0].grad_fn.name()
    assert not result[1].requires_grad                       # z: kept, no gradient
    assert result[2] is args["running_mean"] and args["running_mean"]._version > version
    native_seen = list(seen)
    by_name = dict(zip(names, native_seen))
    assert (by_name["M"], by_name["N"], by_name["K"], by_name["g_numel"]) == (M, N, K, M * N)
    assert by_name["stream"] == 4242 and by_name["bn_training"] == 1
    assert by_name["x"] == args["x"].data_ptr() and by_name["w"] == args["w"].data_ptr()
    assert by_name["operand0"] == args["operand0"].data_ptr() and by_name["z"] == result[1].data_ptr()
    assert by_name["dx"] == by_name["dw"] == by_name["need_dx"] == by_name["need_dw"] == 0
    assert by_name["dz_out"] and by_name["grad_cols"] and by_name["workspace"]

    dz = (2 * g.float()).to(torch.bfloat16)
    assert torch.equal(native["x"], dz @ args["w"].detach()) and torch.equal(native["w"], dz.t() @ args["x"].detach())
    # (BatchNorm's β and γ are the last two rows of the column sums)
    rows = len([n for n in names if n.startswith("operand")]) + 2
    assert torch.equal(native["beta"], torch.full((N,), rows - 1.0) + 0.5 * (torch.arange(N) % 4))
    assert torch.equal(native["gamma"], torch.full((N,), float(rows)) + 0.5 * (torch.arange(N) % 4))
    assert torch.equal(native["operand0"], torch.full((N,), 1.0) + 0.5 * (torch.arange(N) % 4))

    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    result, python = _gradients(module, _inputs(module, autocast=autocast), g)
    assert "PartNode" not in result[0].grad_fn.name()
    python_seen = dict(zip(names, seen))
    for name in ("M", "N", "K", "g_numel", "stream", "bn_training", "dx", "dw", "need_dx", "need_dw"):
        assert python_seen[name] == by_name[name], name
    assert set(python) == set(native)
    for name in native:
        dtype = torch.bfloat16 if name in ("x", "w") or not autocast else torch.float32
        assert python[name].dtype == native[name].dtype == dtype, name
        assert torch.equal(python[name], native[name]), name


@pytest.mark.parametrize("requires", [("x", "w", "operand0", "gamma", "beta"), ("w",), ("x", "gamma")],
                         ids=["every input", "w only", "x and gamma"])
def test_an_fp32_module_s_node_has_the_entry_compute_dx_and_dw(monkeypatch, file_and_library, requires):
    """For an fp32 module the node hands the entry dx and dW (where wanted) and no dz, as the
    Python vjp does (kgen's fp32-exact GEMMs are in the entry, not torch's), and returns the
    Python node's gradients bit for bit."""
    module, library, names, seen = file_and_library
    _stub(monkeypatch, module, library)
    g = torch.randn(M, N, generator=torch.Generator().manual_seed(3))
    args = _inputs(module, requires=requires, dtype=torch.float32)
    result, native = _gradients(module, args, g)
    assert "PartNode" in result[0].grad_fn.name(), result[0].grad_fn.name()
    by_name = dict(zip(names, seen))
    assert by_name["dz_out"] == 0 and by_name["grad_cols"] and by_name["workspace"]
    assert (by_name["need_dx"], by_name["need_dw"]) == ("x" in requires, "w" in requires)
    assert bool(by_name["dx"]) == ("x" in requires) and bool(by_name["dw"]) == ("w" in requires)
    assert set(native) == set(requires)
    x, w = args["x"].detach().double(), args["w"].detach().double()
    if "x" in requires:
        assert native["x"].dtype == torch.float32
        torch.testing.assert_close(native["x"].double(), 2 * g.double() @ w, rtol=1e-6, atol=1e-6)
    if "w" in requires:
        torch.testing.assert_close(native["w"].double(), 2 * g.double().t() @ x, rtol=1e-6, atol=1e-6)

    monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    result, python = _gradients(module, _inputs(module, requires=requires, dtype=torch.float32), g)
    assert "PartNode" not in result[0].grad_fn.name()
    python_seen = dict(zip(names, seen))
    for name in ("M", "N", "K", "g_numel", "stream", "bn_training", "need_dx", "need_dw"):
        assert python_seen[name] == by_name[name], name
    assert set(python) == set(native)
    for name in native:
        assert python[name].dtype == native[name].dtype == torch.float32, name
        assert torch.equal(python[name], native[name]), name


def test_the_node_returns_only_the_gradients_asked_for(monkeypatch, file_and_library):
    module, library, _, _ = file_and_library
    _stub(monkeypatch, module, library)
    g = torch.randn(M, N, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    args = _inputs(module, requires=("w",))
    _, grads = _gradients(module, args, g)
    assert set(grads) == {"w"} and grads["w"].shape == (N, K)
    args = _inputs(module, requires=("x", "gamma"))
    result = module._kgen_part_call(0, args.pop("x"), args.pop("w"), **args)
    result[0].backward(g)
    assert args["gamma"].grad is not None and args["beta"].grad is None and args["operand0"].grad is None


def test_the_kernels_error_reaches_backward_and_a_second_derivative_is_refused(monkeypatch, file_and_library):
    module, library, _, _ = file_and_library
    _stub(monkeypatch, module, library)
    args = _inputs(module, rows=7)                            # g of FAIL_NUMEL elements
    x, w = args.pop("x"), args.pop("w")
    out = module._kgen_part_call(0, x, w, **args)[0]
    with pytest.raises(RuntimeError, match="kgen backward kernel failed: the stand-in's failure"):
        out.backward(torch.ones_like(out))
    args = _inputs(module)
    x, w = args.pop("x"), args.pop("w")
    out = module._kgen_part_call(0, x, w, **args)[0]
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(out, [x], torch.ones_like(out).requires_grad_(), create_graph=True)


def test_the_node_keeps_autograds_rules(monkeypatch, file_and_library):
    """The node is an autograd Node of its own (not a torch::autograd::Function): it keeps the rules
    the Function kept for it. Its saved tensors are freed by a backward (a second one raises
    torch's error) unless the graph is retained (then the same gradients again); a saved input
    changed in place after the forward is caught when the backward unpacks it; a dual tensor
    (forward-mode AD) is refused; where no input wants a gradient the output has no node; and
    an output the loss does not reach (its gradient undefined) gives what zeros give."""
    module, library, _, _ = file_and_library
    _stub(monkeypatch, module, library)
    g = torch.randn(M, N, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)

    def forward(**requires):
        args = _inputs(module, **requires)
        x, w = args.pop("x"), args.pop("w")
        return module._kgen_part_call(0, x, w, **args)[0], x, w

    out, x, w = forward()
    assert out.grad_fn.name() == "kgen::PartNode"
    first = torch.autograd.grad(out, [w], g, retain_graph=True)[0]
    assert torch.equal(torch.autograd.grad(out, [w], g)[0], first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out, [w], g)

    out, x, w = forward()
    with torch.no_grad():
        x.mul_(2)   # (x wants a gradient: a leaf's in-place change needs no_grad)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(g)

    import torch.autograd.forward_ad as fwad

    args = _inputs(module)
    x, w = args.pop("x"), args.pop("w")
    with fwad.dual_level():
        dual = fwad.make_dual(x.detach(), torch.ones_like(x))
        with pytest.raises(RuntimeError, match="no forward-mode gradient"):
            module._kgen_native_call(0, dual, w, dict(args))

    args = _inputs(module, requires=())
    x, w = args.pop("x"), args.pop("w")
    out = module._kgen_native_call(0, x, w, dict(args))[0]
    assert out.grad_fn is None and not out.requires_grad

    class DropsIt(torch.autograd.Function):   # sends out no gradient (None), w.sum()'s through
        @staticmethod
        def forward(ctx, a, b):
            return b.clone()

        @staticmethod
        def backward(ctx, grad):
            return None, grad

    out, x, w = forward(requires=("w",))
    (grad,) = torch.autograd.grad(DropsIt.apply(out, w.float().sum()), [w], torch.tensor(1.0))
    assert torch.equal(grad.float(), torch.ones(N, K))


@pytest.mark.parametrize("ref", [str(p) for p in SYNTHESIZED_REFS] + ["gemm_scale_bn", "gemm_bn_scale_softmax"],
                         ids=lambda r: r.rsplit("/", 1)[-1])
def test_every_gradient_the_python_vjp_returns_the_node_returns(ref):
    """For each part that trains through the C++ node, its plan's gradients are the Python vjp's:
    the same inputs get one (a gradient the node's inputs left out would be lost silently), and
    every entry argument has a source."""
    from kgen.tune.search import enumerate_specs

    spec = next((s for s in enumerate_specs(ref, 64, 128, 1024) if s.family == "wgmma"), None)
    if spec is None:
        pytest.skip("no GEMM to train (a rewrite made the output a constant)")
    codes = generator.native_codes()
    for low in generator.lowered_parts(spec):
        if not generator.uses_native_backward(spec, low):
            continue
        # (the op's inputs, whose gradients the Python vjp returns from op_gradients)
        names = generator.op_part(low)["names"].split(", ")
        python = {n for n in names if generator.op_gradients(low).get(n) is not None}
        plan = generator.native_plan(low)
        native = {name for code, _, _, _, name in plan["grads"] if code != codes["Grad"]["None"]}
        assert native == python, (spec.problem_name, native, python)
        assert [name for _, _, name in plan["sources"]] == [name for name, _ in generator.backward_args(low)]


def test_a_build_makes_the_node_too(tmp_path, monkeypatch):
    """EmittedFile.build builds the C++ node beside the kernels (a search's parallel builds, not
    its first training check), in every dtype; for a file whose training does not run the node,
    only the kernels."""
    from kgen.check.loading import EmittedFile

    spec = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="wgmma", fusion=2, tile=WGMMA)
    f = EmittedFile(generator.write(spec, tmp_path / "new.py"), with_reference=False)
    built = []
    monkeypatch.setattr(f.module, "_kgen_build", lambda device=None, dtype=torch.float32, autocast=False, fp32_weight=False:
                        built.append(("kernels", dtype, autocast)))
    monkeypatch.setattr(f.module, "_kgen_native_module", lambda: built.append(("node",)))
    f.build(torch.bfloat16)
    f.build(torch.float16, autocast=True)
    f.build(torch.float32)
    f.build()
    assert built == [("kernels", torch.bfloat16, False), ("node",), ("kernels", torch.float16, True), ("node",),
                     ("kernels", torch.float32, False), ("node",), ("kernels", torch.float32, False), ("node",)]
    monkeypatch.setattr(f.module, "_KGEN_NATIVE_PLANS", (None,))
    built.clear()
    f.build(torch.bfloat16)
    assert built == [("kernels", torch.bfloat16, False)]


def test_a_file_without_a_16_bit_build_says_so_when_one_is_asked_for(monkeypatch):
    """A build asked for a dtype the file does not run (a search's parallel builds, EmittedFile.build)
    is refused with the dtypes it runs, before any compiler runs."""
    fp32_only = Spec.of("gemm_scale_bn", 64, 128, 1024, math="tf32x3", backend="kgen", fusion=1,
                         tile=Tile(128, 128, 32, 64, 32, stages=4), arch="sm_80")
    module = exec_file(generator.render(fp32_only))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: type("Properties", (), {"shared_memory_per_block_optin": 232448})())
    monkeypatch.setattr(module, "load_inline", lambda **kwargs: pytest.fail("no build was to start"))
    with pytest.raises(TypeError, match="no build for torch.bfloat16: it runs float32 modules"):
        module._kgen_build(dtype=torch.bfloat16, autocast=True)
