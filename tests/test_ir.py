"""CPU tier of the synthesis path: reference file -> trace -> IR -> lowering -> emitted file.

- every reference of tests/refs/ and kgen/refs/ traces, and its IR, run through the torch oracle
  (ir.Graph.interpret), computes what the module computes (output and BatchNorm buffers);
- random point-wise chains written as modules trace to IRs that compute what the module does;
- `kgen generate REF.py` works for each without a GPU and the file passes the static rules;
- every module's generated epilogue compiles with nvcc (test_compile's harness);
- modules outside the family are refused with exit 2, naming the op and its line.
"""

import ast
import copy
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.lower import forward as lower
from kgen.frontend import problems
from kgen.ir.graph import Unsupported
from kgen.ir.ops import POINTWISE
from kgen.frontend.reference import Reference
from kgen.tune.search import enumerate_specs
from kgen.check.static_checks import check_emitted
from kgen.frontend.trace import trace

from conftest import REFUSED_REFS, SYNTHESIZED_REFS, module_source, nvcc_prefetch
from nvcc_jobs import SM90A, check_job

ROOT = Path(__file__).resolve().parent.parent
REFS = SYNTHESIZED_REFS
SHIPPED = [f"kgen:{name}" for name in problems.PROBLEMS]
# out_features: a multiple of the groups of every GroupNorm in tests/refs/ (up to 512).
SMALL = {"batch": 8, "in_features": 16, "out_features": 1024}


def check_oracle(ref: Reference, training: bool = True):
    graph = trace(ref)
    if graph.dropouts and training:
        pytest.skip("dropout draws a random mask in training mode (the emitted file refuses it)")
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    twin = copy.deepcopy(model)
    model.train(training)
    twin.train(training)
    x = torch.rand(SMALL["batch"], SMALL["in_features"], dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        expect = model(x)
        got = graph.interpret(x, twin)
    assert got.shape == expect.shape
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)
    for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
    return graph


@pytest.mark.parametrize("ref", [str(p) for p in REFS] + SHIPPED)
@pytest.mark.parametrize("training", [True, False])
def test_ir_oracle_matches_the_module(ref, training):
    check_oracle(Reference(ref, SMALL), training)


# Of a 16-bit output, the share of elements that may differ by more than two steps of the dtype
# between the IR and the module: the two sum the GEMM in other orders, and a one-step difference
# of z at a rounding tie is multiplied by |z| / sigma where a normalization follows (KernelBench
# 62 in fp16: 1 element of 8192).
HALF_TIE_SHARE = 1e-3


def check_half_oracle(reference: Reference, dtype: torch.dtype):
    """The IR run in bf16 / fp16 (torch's ops in the module's dtype, op by op; the Linear's
    bias added to the GEMM's fp32 output before one rounding, as addmm does) against the module
    converted with .to(dtype), in training mode: the same values, to two steps of the dtype, but
    for HALF_TIE_SHARE of them."""
    graph = trace(reference)
    if graph.dropouts:
        pytest.skip("dropout draws a random mask in training mode")
    torch.manual_seed(0)
    model = reference.Model(*reference.init_args()).to(dtype)
    twin = copy.deepcopy(model)
    x = (torch.rand(SMALL["batch"], SMALL["in_features"]) * 2 - 1).to(dtype)
    with torch.no_grad():
        expect = model(x)
        got = graph.interpret(x, twin)
    assert got.dtype == expect.dtype == dtype and got.shape == expect.shape
    step = torch.finfo(dtype).eps
    beyond = ~torch.isclose(got, expect, rtol=2 * step, atol=2 * step * float(expect.abs().max()))
    assert float(beyond.float().mean()) <= HALF_TIE_SHARE, \
        f"{int(beyond.sum())} of {beyond.numel()} elements beyond two steps of {dtype}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("ref", [str(p) for p in REFS] + SHIPPED)
def test_ir_oracle_matches_the_module_in_half_precision(ref, dtype):
    check_half_oracle(Reference(ref, SMALL), dtype)


OUTPUT_LEVELS = {"gemm_sigmoid_sum": "row", "gemm_sum_max_mean_lse": "row", "gemm_maxpool_sum_scale": "rowflat",
                 "gemm_avgpool_gelu_softmax": "pooled", "gemm_sigmoid_avgpool": "pooled", "gemm_groupnorm_min_bias": "full",
                 "gemm_max_sub_gelu": "row", "gemm_sigmoid_gemm_lse": "rowflat"}


@pytest.mark.parametrize("ref", REFS, ids=lambda p: p.stem)
def test_references_trace_to_one_gemm_and_an_epilogue(ref):
    g = trace(Reference(ref))
    assert [n.kind for n in g.nodes].count("gemm") == 1
    assert g.output_level() == OUTPUT_LEVELS.get(ref.stem, "tile")
    low = lower.lower(g, fused_stats=True, external_gemm=False)
    has_rows = any(n.kind in lower.ROW_KINDS for n in g.nodes) and low.constant is None
    assert (low.eval.stage2 == lower.STAGE2_ROWS) == has_rows
    if low.constant is not None:
        # Rewrites made the output a constant: nothing runs but a fill.
        assert low.eval.stage2 == lower.STAGE2_NONE and "no GEMM" in " ".join(low.summary())
    elif not g.batchnorms and not has_rows:
        # A pure point-wise chain is one kernel: the GEMM with the whole chain in its epilogue.
        assert low.eval.stage2 == lower.STAGE2_NONE and low.eval.stored == g.output


FORMS = {  # how a reference writes op `name` on x, as a module expression
    "relu": ["torch.relu(x)", "F.relu(x)", "x.relu()"],
    "sigmoid": ["torch.sigmoid(x)", "x.sigmoid()"], "tanh": ["torch.tanh(x)"],
    "gelu": ["F.gelu(x)", "F.gelu(x, approximate='tanh')"], "silu": ["F.silu(x)", "x * torch.sigmoid(x)"],
    "mish": ["F.mish(x)"], "softplus": ["F.softplus(x)", "F.softplus(x, beta=2.0, threshold=5.0)"],
    "hardtanh": ["F.hardtanh(x, -2.0, 2.0)"], "hardsigmoid": ["F.hardsigmoid(x)"],
    "hardswish": ["F.hardswish(x)"], "elu": ["F.elu(x, alpha=0.5)"], "selu": ["F.selu(x)"],
    "leaky_relu": ["F.leaky_relu(x, 0.2)"], "exp": ["torch.exp(x * 0.1)"], "abs": ["x.abs()"],
    "neg": ["-x"], "clamp": ["torch.clamp(x, min=-0.5, max=0.5)", "x.clamp(max=0.3)"],
    "pow": ["x ** 2", "torch.pow(x, 3.0)"], "add": ["x + 1.5", "2.0 + x", "x + self.bias2"],
    "sub": ["x - 0.25", "1.0 - x", "x - self.bias2"], "mul": ["x * 3.0", "self.scale2 * x"],
    "div": ["x / 2.0", "x / self.scale2"], "residual": ["x + x"], "detach": ["x + x.clone().detach()"], "zero_if_inf": ["x - torch.logsumexp(x, dim=1, keepdim=True)"],
    "sqrt": ["torch.sqrt(x.abs() + 1.0)"], "log": ["torch.log(x.abs() + 1.0)"],
    "norm_sqrt": ["x * x.norm(dim=1, keepdim=True)", "x + x.std(dim=1, keepdim=True)"],
    "log1p": ["torch.log1p(x.abs())"], "erf": ["torch.erf(x * 0.5)"],
    "expm1": ["torch.expm1(x * 0.1)", "x.expm1()"], "exp2": ["torch.exp2(x * 0.1)"],
    "log2": ["torch.log2(x.abs() + 1.0)"], "log10": ["(x.abs() + 1.0).log10()"],
    "rsqrt": ["torch.rsqrt(x.abs() + 1.0)"],
    "erfc": ["torch.erfc(x * 0.5)"], "atan": ["torch.atan(x)", "x.arctan()"],
    "sin": ["torch.sin(x)", "x.sin()"], "cos": ["torch.cos(x) + x", "x.cos_()"],
    "tan": ["torch.tan(x * 0.5)"], "sinh": ["x.sinh()"], "cosh": ["torch.cosh(x * 0.5)"],
    "asin": ["torch.asin(torch.tanh(x) * 0.9)"], "acos": ["(torch.tanh(x) * 0.5).arccos()"],
    "asinh": ["torch.asinh(x)", "x.arcsinh()"], "acosh": ["torch.acosh(x * x + 1.5)"],
    "atanh": ["torch.atanh(torch.tanh(x) * 0.5)"], "ndtr": ["x * torch.special.ndtr(x)"],
    "rpow": ["2.0 ** x", "torch.pow(0.5, x) * x"],
    "fmax": ["torch.fmax(x, self.bias2)"], "fmin": ["torch.fmin(x, torch.tanh(x))"],
    "pow_tensor": ["(x.abs() + 0.5) ** torch.sigmoid(x)", "torch.pow(x.abs() + 1.0, self.scale2)"],
    "fmod": ["torch.fmod(x, 0.3) + x"], "remainder": ["x % -0.3 + x", "torch.remainder(x, 0.25) + x"],
    "floor_divide": ["x // 0.3 + x", "torch.floor_divide(x, -0.25) * 0.1 + x"],
    "floor": ["torch.floor(x * 4.0) + x"], "ceil": ["x.ceil() * 0.25 + x"],
    "round": ["torch.round(x * 3.0) + x"], "trunc": ["torch.trunc(x * 2.0) - x"],
    "frac": ["torch.frac(x * 2.0) + x", "(x * 3.0).frac()"],
    "logit": ["torch.logit(torch.sigmoid(x) * 0.8 + 0.1)", "torch.special.logit(torch.sigmoid(x), eps=1e-3)"],
    "logaddexp": ["torch.logaddexp(x, self.bias2)", "x.logaddexp(torch.tanh(x))"],
    "minimum": ["torch.min(x, self.scale2)", "torch.minimum(x, self.bias2)"],
    "maximum": ["torch.maximum(x, self.bias2)"],
    "where": ["torch.where(x > 0, x, 0.1 * x)", "x.where(x < self.bias2, self.scale2 * x)",
              "torch.where(x >= 0.2, x, torch.zeros_like(x))"],
    # (casts: identities in an fp32 module, an upcast and its cast back in a 16-bit one)
    "to_float32": ["torch.tanh(x.float())"],
    "to_module_dtype": ["torch.tanh(x.float()).to(x.dtype)"],
    # (the upcast inside a reduction torch computes in float32: Tracer._internal_upcast)
    "to_opmath": ["x / (x.std(dim=1, keepdim=True) + 1.0)", "x / (x.norm(dim=1, keepdim=True) + 1.0)"],
}
REDUCTION_FORMS = ["torch.softmax(x, dim=1)", "F.log_softmax(x, dim=-1)",
                   "torch.logsumexp(x, dim=1, keepdim=True)", "x.sum(dim=1, keepdim=True)",
                   "x.mean(1, keepdim=True)", "torch.max(x, dim=1, keepdim=True)[0]",
                   "x - x.amax(dim=1, keepdim=True)", "torch.sum(x, dim=1)"]

# Modules of random chains: a Linear, a per-feature bias2 and a one-element scale2.
CHAIN_PARAMS = {"bias2": "nn.Parameter(torch.randn(out_features))",
                "scale2": "nn.Parameter(torch.rand(1) + 0.5)"}


def chain_source(body: str) -> str:
    return module_source(body, CHAIN_PARAMS, out_features=24)


@pytest.mark.parametrize("seed", range(24))
def test_random_pointwise_chains_match_the_module(seed, tmp_path):
    rng = random.Random(seed)
    forms = [f for fs in FORMS.values() for f in fs]
    steps = [rng.choice(forms) for _ in range(rng.randint(1, 6))]
    if seed % 3 == 0:   # and sometimes a row reduction in the middle or at the end
        steps.insert(rng.randint(0, len(steps)), rng.choice(REDUCTION_FORMS[:-1]))
    body = "\n".join(f"x = {s}" for s in steps)
    path = tmp_path / f"chain_{seed}.py"
    path.write_text(chain_source(body))
    check_oracle(Reference(path))
    # ... and it lowers and renders (the CUDA of each op is compiled in test_ops and below).
    lower.lower(trace(Reference(path)), fused_stats=True, external_gemm=False)


def test_every_pointwise_op_of_the_table_is_reachable_from_a_module():
    reachable = {"identity", "minimum_const", "maximum_const"}   # not written by references
    for name, forms in FORMS.items():
        if name in POINTWISE:
            reachable.add(name)
    assert set(POINTWISE) <= reachable | {"residual"}


def generate_in_process(ref: str, out: Path, cwd: Path):
    """`kgen generate REF -o OUT` run from `cwd`, in this process (click's runner: a fresh
    interpreter per module cost most of this file's time; the first module's test runs the real
    command line)."""
    from click.testing import CliRunner

    from kgen.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        r = CliRunner().invoke(main, ["generate", ref, "-o", str(out)])
    assert r.exit_code == 0 and r.exception is None, f"{r.output}\n{r.exception!r}"


@pytest.mark.parametrize("ref", [str(p) for p in REFS], ids=lambda p: Path(p).stem)
def test_generate_writes_a_checked_file_without_a_gpu(ref, tmp_path):
    out = tmp_path / "new.py"
    if ref == str(REFS[0]):   # the real command line, once
        proc = subprocess.run([sys.executable, "-m", "kgen.cli", "generate", ref, "-o", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        generate_in_process(ref, out, tmp_path)
    text = out.read_text()
    ast.parse(text)
    assert check_emitted(text) == []
    assert "reference: " + str(Path(ref).resolve()) in text


@pytest.mark.parametrize("ref, op", sorted(REFUSED_REFS.items()))
def test_modules_outside_the_family_are_refused_with_exit_2(ref, op, tmp_path):
    path = ROOT / "tests" / "refs" / f"{ref}.py"
    proc = subprocess.run([sys.executable, "-m", "kgen.cli", "generate", str(path), "-o",
                           str(tmp_path / "x.py")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert op in proc.stderr and re.search(r"line \d+", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x.py").exists()


def test_second_batchnorm_and_unknown_ops_raise_unsupported(tmp_path):
    path = tmp_path / "cumsum.py"
    path.write_text(chain_source("x = torch.cumsum(x, 1)"))
    with pytest.raises(Unsupported, match="cumsum"):
        trace(Reference(path))
    path = tmp_path / "two_bn.py"
    path.write_text(module_source("x = self.bn2(torch.relu(self.bn1(x)))",
                                  {"bn1": "nn.BatchNorm1d(out_features)", "bn2": "nn.BatchNorm1d(out_features)"},
                                  out_features=24))
    with pytest.raises(Unsupported, match=r"line \d+: `x = self.bn2.*a second BatchNorm1d after the same GEMM"):
        trace(Reference(path))


def test_operand_limit_is_the_kernels():
    common = (ROOT / "kgen" / "codegen" / "kernels" / "common.cuh").read_text()
    assert f"constexpr int kMaxOperands = {lower.MAX_OPERANDS};" in common


# The first (GEMM) candidate of each module, and the matrix-vector rewrite where it applies
# (1024 features: a multiple of every GroupNorm's groups).
NVCC_SPECS = [enumerate_specs(str(p.resolve()), 64, 128, 1024)[0] for p in REFS] + [
    s for p in REFS for s in enumerate_specs(str(p.resolve()), 64, 128, 1024) if s.family == "gemv"]


@nvcc_prefetch(lambda p: [check_job(generator.render_cuda_source(p["spec"]), (SM90A,))])
@pytest.mark.parametrize("spec", NVCC_SPECS, ids=lambda s: f"{s.problem_name}-{s.family}")
def test_every_generated_epilogue_compiles(spec, tmp_path):
    from test_compile import NVCC, compile_check, spills

    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    report = compile_check(generator.render_cuda_source(spec), (SM90A,))
    assert spills(report) == []


def test_a_trace_is_kept_per_workload_and_each_caller_gets_its_own_copy(tmp_path):
    """trace() keeps one IR per workload (file text, constants as set, init args, input shape):
    another Reference of the same workload gets an equal graph, not the same object (a caller
    that changed it would change the next caller's); a constant set otherwise, or an edited
    file, is another workload."""
    path = tmp_path / "m.py"
    path.write_text(module_source("x = torch.relu(x) * 2.0", {}, out_features=24))
    first, again = trace(Reference(path)), trace(Reference(path))
    assert first is not again and first.describe() == again.describe()
    first.out_features = -1
    assert trace(Reference(path)).out_features == 24
    assert trace(Reference(path, constants={"out_features": 40})).out_features == 40
    path.write_text(module_source("x = torch.tanh(x) * 2.0", {}, out_features=24))
    assert "tanh" in trace(Reference(path)).describe()
