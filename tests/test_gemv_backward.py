"""The matrix-vector rewrite's backward (kernels/gemv_backward.cuh; kgen/lower/backward.py,
_gemv_structs): its forward never forms z, and its backward forms no dz (dz has rank one: dx
and dW are outer products of vectors).

Modules spelled as others write them: the row sum's chain as a Linear's bias, a subtraction, a
per-feature or one-element scale (whose gradient reads z: W u), a division by a constant; the
sum as torch.sum / .mean / .sum with dims 1, -1 and keepdim or not; the module's input added back
(a broadcast tail) with and without a gradient through it.

CPU: what the structs say, what a file's header says, and what stays refused. GPU (marked): kgen
validate's full gate (gradients against fp64 with eager's error as the yardstick, and the
training check) in fp32 at 1e-4 and in bf16 / fp16 at 1e-2."""

from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.lower import backward
from kgen.tune.spec import Spec

TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
{init}

    def forward(self, x):
{forward}


batch, features_in, features_out = 65, 301, 200


def get_inputs():
    return [torch.rand(batch, features_in)]


def get_init_inputs():
    return [features_in, features_out]
'''

# name: (constructor lines, forward lines, whether a parameter's gradient reads z)
MODULES = {
    # KernelBench 51's kind, with the residual's gradient flowing (its own file detaches it)
    "shift_mean_residual": (
        ["self.gemm = nn.Linear(in_features, out_features)",
         "self.subtract = nn.Parameter(torch.randn(out_features))"],
        ["y = self.gemm(x) - self.subtract",
         "y = torch.mean(y, dim=1, keepdim=True)",
         "y = torch.logsumexp(y, dim=1, keepdim=True)",
         "return F.gelu(y) + x"], False),
    # a per-feature scale, a division by a constant, the sum over -1 without keepdim
    "scale_div_sum": (
        ["self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)",
         "self.scale = nn.Parameter(torch.rand(out_features) + 0.5)"],
        ["y = torch.matmul(x, self.weight.t()) * self.scale / 2",
         "return torch.tanh(y.sum(-1))"], True),
    # a one-element scale and a per-feature shift on a Linear without bias, F.linear, .sum(1, keepdim)
    "scalar_gain_shift": (
        ["self.lin = nn.Linear(in_features, out_features, bias=False)",
         "self.gain = nn.Parameter(torch.tensor([1.5]))",
         "self.shift = nn.Parameter(torch.randn(out_features) * 0.1)"],
        ["y = self.gain * F.linear(x, self.lin.weight) + self.shift",
         "return torch.sigmoid(y.sum(1, keepdim=True) * 0.05)"], True),
    # per-feature operands computed from parameters (an exp, a product, sub's alpha), the mean
    # over dim 1 without keepdim (review, session 36: these crashed generation)
    "computed_operands": (
        ["self.gemm = nn.Linear(in_features, out_features)",
         "self.log_scale = nn.Parameter(torch.randn(out_features) * 0.1)",
         "self.shift = nn.Parameter(torch.randn(out_features))",
         "self.div = nn.Parameter(torch.rand(out_features) + 1.0)"],
        ["y = self.gemm(x) * torch.exp(self.log_scale)",
         "y = torch.sub(y, self.shift, alpha=2) / (self.div * 2)",
         "return torch.sin(y.mean(1))"], True),
}


def module_text(name: str) -> str:
    init, forward, _ = MODULES[name]
    return TEMPLATE.format(init="\n".join(f"        {line}" for line in init),
                           forward="\n".join(f"        {line}" for line in forward))


def gemv_spec(path: Path, batch: int = 65, k: int = 301, n: int = 200) -> Spec:
    return Spec.of(str(path), batch, k, n, math="fp32_simt", backend="gemv", fusion=1)


@pytest.fixture(scope="module")
def refs(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("gemv_backward")
    out = {}
    for name in MODULES:
        (d / f"{name}.py").write_text(module_text(name))
        out[name] = d / f"{name}.py"
    return out


@pytest.mark.parametrize("name", MODULES)
def test_the_rewrite_has_backward_kernels(refs, name):
    """Each module has them; its struct says whether a parameter's gradient reads z (a scale: the
    backward then computes W u), and the header says what the backward runs and keeps."""
    spec = gemv_spec(refs[name])
    low = generator.lowered(spec)
    assert backward.unsupported(low) is None
    assert backward.kind(low) == backward.KIND_GEMV
    source = generator.render_cuda_source(spec)
    assert f"static constexpr bool kReadsZ = {str(MODULES[name][2]).lower()};" in source
    assert "gemv_backward(" in source and "struct GemvRowsBackward" in source
    header = generator.render_header(spec, None)
    line = next(line for line in header.splitlines() if line.startswith("backward:"))
    assert "no GEMM: kernels/gemv_backward.cuh" in line and "keeps each row's sum and W's column sums" in line
    # The file keeps M + (the core's width) M floats, then (16-byte aligned) K, not z.
    text = generator.render(spec)
    assert "return x.new_empty((M + M * core_width + 3) // 4 * 4 + K if keep_z else 0" in text
    # Its backward runs no GEMM (torch's or kgen's), on x and w as they are.
    backward_code = text[text.index("def _kgen_launch_backward"):text.index("def _kgen_part0_backward")]
    assert "torch.mm" not in backward_code and ".float()), _kgen_aligned(w.float())" not in backward_code
    assert "library = _kgen_build(x.device, dtype, bool(autocast))" in backward_code


def test_a_gemm_files_backward_is_unchanged_by_it(refs):
    """Only a gemv file carries the rewrite's backward: a wgmma file of the same module keeps z
    and its GEMMs, with no gemv kernel in its source."""
    from kgen.tune.spec import Tile

    spec = Spec.of(str(refs["scale_div_sum"]), 65, 301, 200, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    source = generator.render_cuda_source(spec)
    assert "struct GemvRowsBackward" not in source and "row_dot_kernel" not in source
    assert "return x.new_empty(M * N + per_column * N + M * core_width" in generator.render(spec)


@pytest.mark.parametrize("gain", ["self.gain", "(self.gain * 2)", "self.gain.exp()"])
def test_what_stays_refused_says_so(tmp_path, gain):
    """A parameter read after the row sum, as it is or through ops on it, has no backward kernel
    yet: the header says so, and the file's backward() raises with that line."""
    path = tmp_path / "after.py"
    line = f"return torch.sum(self.gemm(x), dim=1, keepdim=True) * {gain}"
    path.write_text(TEMPLATE.format(
        init="        self.gemm = nn.Linear(in_features, out_features)\n"
             "        self.gain = nn.Parameter(torch.ones(1))",
        forward=f"        {line}"))
    spec = gemv_spec(path)
    reason = backward.unsupported(generator.lowered(spec))
    assert reason is not None and reason.startswith(
        "no backward kernel yet for a parameter read after the matrix-vector rewrite's row sum"), reason
    assert f"`{line}`" in reason
    assert "\nbackward:  raises at backward()" in generator.render_header(spec, None)


# ---- GPU tier ------------------------------------------------------------------------------------
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(scope="module")
def built(refs, tmp_path_factory):
    from kgen.tune.search import Candidate, build_all

    if not torch.cuda.is_available():
        return {}
    d = tmp_path_factory.mktemp("gemv_backward_files")
    candidates = [Candidate(s, generator.write(s, d / f"{s.name()}.py"))
                  for s in (gemv_spec(path) for path in refs.values())]
    for dtype in DTYPES:
        build_all(candidates, 16, 600, lambda line: None, dtype=dtype)
    return {name: next(c.path for c in candidates if c.spec.problem == str(path)) for name, path in refs.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MODULES)
def test_the_full_gate_passes_the_rewrites_backward(built, name, dtype):
    """kgen validate's full gate, gradients and (fp32) the training check included, at the
    dtype's tolerance. KernelBench's replay (allclose against eager in the dtype) passes in
    bf16 / fp16, or fails only where eager is further from fp64 than the file (the rewrite never
    rounds z: scale_div_sum's tanh of a row sum, eager bf16 2-3e-2 from fp64 and the file 2e-3,
    on the H200 in session 36)."""
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import KERNELBENCH_CHECK, validate

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    tol = 1e-4 if dtype == "fp32" else 1e-2
    results = validate(EmittedFile(built[name]), tol=tol, dtype=DTYPES[dtype])
    gradients = [r for r in results if r.name.startswith("gradients")]
    assert gradients and all("not checked" not in r.detail for r in gradients), [r.line() for r in gradients]
    replay = [r for r in results if r.name == KERNELBENCH_CHECK]
    if dtype != "fp32":
        assert replay and all(r.passed or r.max_abs <= r.ref_abs for r in replay), [r.line() for r in replay]
        results = [r for r in results if r.name != KERNELBENCH_CHECK]
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]
