"""kgen.ir.ops, the table of point-wise ops. CPU tier: each torch oracle is torch's own function
(checked against nn modules and operators), each CUDA expression is well formed, uses only the
accurate math functions and compiles with nvcc (sm_90a), fp32 literals round-trip, and bad names
are refused by name. GPU tier (`pytest -m gpu`): every CUDA expression, run on the GPU, is as
accurate against fp64 as torch's own fp32 kernel."""

import hashlib
import math
import os
import re
import shutil
import subprocess

import operator

import numpy
import pytest
import torch
import torch.nn as nn

from kgen.ir.ops import POINTWISE, REQUIRED, cuda_expr, cuda_float, torch_apply

INF = float("inf")
NAN = float("nan")

# What the table must hold: op -> its attributes with their defaults.
EXPECTED_ATTRS = {
    "add": (), "sub": (), "mul": (), "div": (), "logaddexp": (),
    "logit": (("eps", None),), "frac": (),
    "neg": (), "abs": (), "exp": (), "log": (), "log1p": (), "erf": (), "sqrt": (), "norm_sqrt": (), "rsqrt": (),
    "expm1": (), "exp2": (), "log2": (), "log10": (),
    "erfc": (), "atan": (), "asin": (), "acos": (), "asinh": (), "acosh": (), "atanh": (), "ndtr": (), "floor": (), "ceil": (), "round": (("decimals", 0.0),), "trunc": (),
    "fmod": (("other", REQUIRED),), "remainder": (("other", REQUIRED),), "floor_divide": (("other", REQUIRED),),
    "sin": (), "cos": (), "tan": (), "sinh": (), "cosh": (),
    "pow": (("exponent", REQUIRED),), "rpow": (("base", REQUIRED),), "pow_tensor": (), "fmax": (), "fmin": (),
    "relu": (), "leaky_relu": (("negative_slope", 0.01),),
    "gelu": (("approximate", "none"),),
    "sigmoid": (), "tanh": (), "silu": (), "mish": (),
    "softplus": (("beta", 1.0), ("threshold", 20.0)),
    "hardtanh": (("min_val", -1.0), ("max_val", 1.0)),
    "hardsigmoid": (), "hardswish": (),
    "elu": (("alpha", 1.0),), "selu": (),
    "clamp": (("min", None), ("max", None)),
    "minimum_const": (("other", REQUIRED),), "maximum_const": (("other", REQUIRED),),
    "minimum": (), "maximum": (),
    "where": (("compare", "gt"),),
    "identity": (), "to_float32": (), "to_opmath": (), "to_module_dtype": (), "detach": (), "zero_if_inf": (),
}
BINARY = {"add", "sub", "mul", "div", "logaddexp", "minimum", "maximum", "pow_tensor", "fmax", "fmin"}

# (op, attrs): every op with its default attributes where it has usable defaults, and with
# non-default ones; pow at each exponent that takes its own code path and at two that do not.
VARIANTS = [
    ("add", {}), ("sub", {}), ("mul", {}), ("div", {}), ("logaddexp", {}),
    ("logit", {}), ("logit", {"eps": 1e-6}), ("logit", {"eps": 0.25}), ("frac", {}),
    ("neg", {}), ("abs", {}), ("exp", {}), ("log", {}), ("log1p", {}), ("erf", {}), ("sqrt", {}), ("norm_sqrt", {}), ("rsqrt", {}),
    ("expm1", {}), ("exp2", {}), ("log2", {}), ("log10", {}),
    ("erfc", {}), ("atan", {}), ("asin", {}), ("acos", {}), ("asinh", {}), ("acosh", {}), ("atanh", {}),
    ("ndtr", {}), ("floor", {}), ("ceil", {}), ("round", {}), ("trunc", {}),
    ("round", {"decimals": 2.0}), ("round", {"decimals": -1.0}),
    ("fmod", {"other": 0.7}), ("fmod", {"other": -1.5}), ("remainder", {"other": 0.7}), ("remainder", {"other": -1.5}),
    ("floor_divide", {"other": 0.7}), ("floor_divide", {"other": -1.5}), ("floor_divide", {"other": 3.0}),
    ("floor_divide", {"other": 0.0}),
    ("sin", {}), ("cos", {}), ("tan", {}), ("sinh", {}), ("cosh", {}),
    *[("pow", {"exponent": e}) for e in (2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 0.0, 1.0, 1.5, -2.5)],
    *[("rpow", {"base": b}) for b in (2.0, 0.5, 10.0, 1.0)],
    ("pow_tensor", {}), ("fmax", {}), ("fmin", {}),
    ("relu", {}), ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}),
    ("gelu", {}), ("gelu", {"approximate": "tanh"}),
    ("sigmoid", {}), ("tanh", {}), ("silu", {}), ("mish", {}),
    ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 10.0}),
    ("softplus", {"beta": 0.5, "threshold": 5.0}),
    ("hardtanh", {}), ("hardtanh", {"min_val": -2.0, "max_val": 0.5}),
    ("hardsigmoid", {}), ("hardswish", {}),
    ("elu", {}), ("elu", {"alpha": 0.5}), ("selu", {}),
    ("clamp", {"min": -1.0}), ("clamp", {"max": 2.0}), ("clamp", {"min": -1.0, "max": 2.0}),
    ("clamp", {"min": -0.1, "max": INF}),
    ("minimum_const", {"other": 0.5}), ("maximum_const", {"other": -0.25}),
    ("minimum", {}), ("maximum", {}),
    *[("where", {"compare": c}) for c in ("gt", "ge", "lt", "le", "eq", "ne")],
    ("identity", {}), ("to_float32", {}), ("to_opmath", {}), ("to_module_dtype", {}), ("detach", {}), ("zero_if_inf", {}),
]


def operands_of(name: str, pair) -> list:
    """The op's operands made from two: (a,) or (a, b), and where's (lhs, rhs, a, b) as
    (a, b, b, a), i.e. torch.where(a > b, b, a) for compare='gt'."""
    arity = POINTWISE[name].arity
    return list(pair)[:arity] if arity <= 2 else [pair[0], pair[1], pair[1], pair[0]]


def variant_id(variant):
    name, attrs = variant
    return name + "".join(f"-{k}={v}" for k, v in attrs.items())


# torch's own definition of each op, reached another way than the table's oracle: an nn module
# (made with the attributes given, so {} means torch's defaults), an operator, or a torch function.
REFERENCES = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "logaddexp": lambda x, y: x.logaddexp(y),
    "logit": lambda x, eps=None: torch.special.logit(x, eps=eps),
    "frac": lambda x: x.frac(),
    "neg": lambda x: -x,
    "abs": lambda x: x.abs(),
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "log1p": lambda x: torch.special.log1p(x),
    "erf": lambda x: torch.special.erf(x),
    "expm1": lambda x: torch.special.expm1(x),
    "exp2": lambda x: torch.special.exp2(x),
    "log2": lambda x: x.log2(),
    "log10": lambda x: x.log10(),
    "erfc": lambda x: torch.special.erfc(x),
    "atan": lambda x: torch.arctan(x),
    "asin": lambda x: torch.arcsin(x),
    "acos": lambda x: x.arccos(),
    "asinh": lambda x: x.asinh(),
    "acosh": lambda x: torch.acosh(x),
    "atanh": lambda x: x.arctanh(),
    "ndtr": lambda x: torch.special.ndtr(x),
    "sin": lambda x: x.sin(),
    "cos": lambda x: x.cos(),
    "tan": lambda x: x.tan(),
    "sinh": lambda x: x.sinh(),
    "cosh": lambda x: x.cosh(),
    "floor": lambda x: x.floor(),
    "ceil": lambda x: x.ceil(),
    "round": lambda x, decimals=0.0: x.round(decimals=int(decimals)),
    "fmod": lambda x, other: x.fmod(other),
    "remainder": lambda x, other: x % other,
    "floor_divide": lambda x, other: x // other,
    "trunc": lambda x: torch.fix(x),
    "sqrt": lambda x: x.sqrt(),
    "norm_sqrt": lambda x: x.sqrt(),   # (its value sqrt's; its gradient at 0 test_ties_probe54's)
    "rsqrt": lambda x: x.rsqrt(),
    "pow": lambda x, exponent: x ** exponent,
    "rpow": lambda x, base: base ** x,
    "pow_tensor": lambda x, y: x ** y,
    "fmax": lambda x, y: x.fmax(y),
    "fmin": lambda x, y: x.fmin(y),
    "relu": lambda x: nn.ReLU()(x),
    "leaky_relu": lambda x, **kw: nn.LeakyReLU(**kw)(x),
    "gelu": lambda x, **kw: nn.GELU(**kw)(x),
    "sigmoid": lambda x: nn.Sigmoid()(x),
    "tanh": lambda x: nn.Tanh()(x),
    "silu": lambda x: nn.SiLU()(x),
    "mish": lambda x: nn.Mish()(x),
    "softplus": lambda x, **kw: nn.Softplus(**kw)(x),
    "hardtanh": lambda x, **kw: nn.Hardtanh(**kw)(x),
    "hardsigmoid": lambda x: nn.Hardsigmoid()(x),
    "hardswish": lambda x: nn.Hardswish()(x),
    "elu": lambda x, **kw: nn.ELU(**kw)(x),
    "selu": lambda x: nn.SELU()(x),
    "clamp": lambda x, **kw: x.clamp(**kw),
    "minimum_const": lambda x, other: torch.minimum(x, torch.full_like(x, other)),
    "maximum_const": lambda x, other: torch.maximum(x, torch.full_like(x, other)),
    "minimum": lambda x, y: torch.min(x, y),
    "maximum": lambda x, y: torch.max(x, y),
    "where": lambda lhs, rhs, a, b, compare="gt": torch.where(getattr(operator, compare)(lhs, rhs), a, b),
    "identity": lambda x: nn.Identity()(x),
    "to_float32": lambda x: x.float(),
    "to_opmath": lambda x: x.float() if x.dtype in (torch.bfloat16, torch.float16) else x,
    "to_module_dtype": lambda x: x,   # (Graph.part_values casts to the module's dtype)
    "detach": lambda x: x.detach(),
    "zero_if_inf": lambda x: x.nan_to_num(posinf=0.0, neginf=0.0).where(~x.isnan(), x),
}

# The CUDA functions an expression may call: the accurate ones (no fast-math intrinsics).
ACCURATE_FUNCTIONS = {"expf", "logf", "sqrtf", "erff", "tanhf", "expm1f", "log1pf", "powf", "exp2f",
                      "log2f", "log10f", "erfcf", "atanf", "asinf", "acosf", "asinhf", "acoshf", "atanhf", "floorf", "ceilf", "rintf", "truncf",
                      "sinf", "cosf", "tanf", "sinhf", "coshf", "fmodf", "copysignf",
                      "fabsf", "fminf", "fmaxf"}
FAST_MATH = ("__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
             "__tanf", "__fdividef", "__frcp", "__fsqrt", "__frsqrt", "__saturatef", "rsqrtf")


def cpu_inputs() -> torch.Tensor:
    """fp32 values: negative and positive, around every op's thresholds, large magnitudes,
    subnormals, signed zeros, infinities and NaN."""
    g = torch.Generator().manual_seed(0)
    special = [0.0, -0.0, 1e-3, -1e-3, 1e-6, 1e-40, -1e-40, 0.5, 1.0, 3.0, 6.0, 10.0, 20.0,
               88.0, 89.0, 100.0, 1e4, 1e30, INF, NAN]
    special += [-v for v in special] + [20.0 + 1e-5, 20.0 - 1e-5, 5.0 + 1e-6, 3.0 + 1e-6]
    return torch.cat([
        torch.tensor(special),
        torch.randn(2000, generator=g) * 5,
        (torch.rand(2000, generator=g) - 0.5) * 200,
        torch.linspace(-25, 25, 1001),
    ]).float()


def assert_same(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# ----------------------------------------------------------------------------------------------
# The table.

def test_table_holds_the_ops_with_their_attributes():
    assert {name: op.attrs for name, op in POINTWISE.items()} == EXPECTED_ATTRS
    for name, op in POINTWISE.items():
        assert op.name == name
        assert op.arity == (2 if name in BINARY else 4 if name == "where" else 1), name
        assert op.doc and "\n" not in op.doc, name


def test_variants_cover_every_op():
    assert {name for name, _ in VARIANTS} == set(POINTWISE)


# ----------------------------------------------------------------------------------------------
# 1. The torch oracle is torch's definition.

@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_torch_oracle_is_torchs_definition(variant):
    name, attrs = variant
    x = cpu_inputs()
    operands = [x, x[torch.randperm(len(x), generator=torch.Generator().manual_seed(1))]]
    operands = operands_of(name, operands)
    expected = REFERENCES[name](*operands, **attrs)
    assert_same(torch_apply(name, operands, attrs), expected)
    full = dict(dict(POINTWISE[name].attrs), **attrs)
    assert_same(POINTWISE[name].torch(*operands, **full), expected)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_oracles_take_a_number_for_either_operand(name):
    x = cpu_inputs()
    reference = REFERENCES[name]
    oracle = POINTWISE[name].torch
    for s in (2.5, -0.1, 0.0):
        assert_same(oracle(x, s), reference(x, torch.full_like(x, s)))
        assert_same(oracle(s, x), reference(torch.full_like(x, s), x))
        assert_same(torch_apply(name, [s, x], {}), reference(torch.full_like(x, s), x))
    # In a float64 tensor's op the number is float64 too; with no tensor, the result is float64.
    x64 = x.double()
    assert_same(oracle(0.1, x64), reference(torch.full_like(x64, 0.1), x64))
    both = torch_apply(name, [0.1, 3.0], {})
    as64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    assert both.dtype == torch.float64 and both.item() == reference(as64(0.1), as64(3.0)).item()


def test_the_ops_that_turn_nan_into_a_number_are_wheres_fmax_fmin_and_a_zeroth_power():
    """ops.gives_a_number_for_nan, from each op's oracle with its default attributes (a number
    where one is required), NaN in each operand in turn: where (the untaken branch), fmax and
    fmin (which drop NaN); among attributes, pow's exponent 0 (NaN ** 0 = 1). codegen keeps
    the tf32x3 split's infinities for these (test_where)."""
    from kgen.ir.ops import gives_a_number_for_nan

    def defaults(op):
        attrs = {k: (2.0 if v is REQUIRED else v) for k, v in op.attrs}
        return {**attrs, **({"min": 0.0} if op.name == "clamp" else {})}

    found = {name for name, op in POINTWISE.items()
             if gives_a_number_for_nan(name, [None] * op.arity, defaults(op))}
    assert found == {"where", "fmax", "fmin"}
    assert gives_a_number_for_nan("pow", [None], {"exponent": 0.0})
    assert not gives_a_number_for_nan("pow", [None], {"exponent": 3.0})
    # a constant operand is taken as it is: NaN only where the value may be
    assert gives_a_number_for_nan("where", [None, 0.0, None, 0.0], {"compare": "ge"})
    assert not gives_a_number_for_nan("add", [None, 1.0])


def test_oracle_keeps_the_dtype():
    x = cpu_inputs().double()
    for name, attrs in VARIANTS:
        operands = operands_of(name, [x, x.flip(0)])
        # (to_float32 is a cast to float32, as the module's .float() is in any dtype)
        want = torch.float32 if name == "to_float32" else torch.float64
        assert torch_apply(name, operands, attrs).dtype == want, name


# ----------------------------------------------------------------------------------------------
# 2. The CUDA expressions: well formed, accurate functions only, and they compile.

OPERAND_NAMES = ["opnd_a", "opnd_b"]


def closes_at_end(text: str, open_at: int) -> bool:
    """Whether the parenthesis opened at text[open_at] closes at the last character."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i == len(text) - 1
    return False


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_cuda_expression_is_well_formed(variant):
    name, attrs = variant
    operands = operands_of(name, OPERAND_NAMES)
    expr = cuda_expr(name, operands, attrs)
    # A primary expression (a call or a parenthesized one): safe as an operand of the next op.
    call = re.match(r"\w+\(", expr)
    assert closes_at_end(expr, call.end() - 1 if call else 0), expr
    # Every use of an operand is parenthesized.
    for operand in operands:
        assert operand not in expr.replace(f"({operand})", ""), expr
    # Only the accurate math functions are called, and no other name appears.
    assert set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", expr)) <= ACCURATE_FUNCTIONS, expr
    names = set(re.findall(r"\b[A-Za-z_]\w*", expr))
    assert names <= ACCURATE_FUNCTIONS | set(operands) | {"INFINITY", "NAN"}, expr
    # Every number is an fp32 literal: a double one would make the arithmetic fp64.
    for number, suffix in re.findall(r"(?<![\w.])(\d[\d.]*(?:e[+-]?\d+)?)(f?)", expr):
        assert suffix == "f", f"{number} in {expr}"


def find_nvcc():
    found = shutil.which("nvcc")
    if found is None and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        found = "/usr/local/cuda/bin/nvcc"
    return found


def function_names() -> list[str]:
    """op_<name> for an op's first variant, op_<name>_<k> for its k-th after that."""
    seen, out = {}, []
    for name, _ in VARIANTS:
        k = seen.get(name, 0)
        seen[name] = k + 1
        out.append(f"op_{name}" if k == 0 else f"op_{name}_{k}")
    return out


def cuda_source() -> str:
    """A device function per variant and a kernel that writes variant v of element i at
    out[v * n + i]."""
    lines = ["// kgen.ir.ops: the CUDA expression of every point-wise op (written by tests/test_ops.py)."]
    for fn, (name, attrs) in zip(function_names(), VARIANTS):
        operands = operands_of(name, ["a", "b"])
        lines.append(f"__device__ float {fn}(float a, float b) {{ return {cuda_expr(name, operands, attrs)}; }}")
    lines += ["",
              "__global__ void all_ops(const float* __restrict__ a, const float* __restrict__ b,",
              "                        float* __restrict__ out, int n) {",
              "  const int i = blockIdx.x * blockDim.x + threadIdx.x;",
              "  if (i >= n) return;",
              "  const float x = a[i], y = b[i];"]
    lines += [f"  out[{v} * n + i] = {fn}(x, y);" for v, fn in enumerate(function_names())]
    lines += ["}", ""]
    return "\n".join(lines)


def test_cuda_source_has_no_fast_math():
    source = cuda_source()
    assert [f for f in FAST_MATH if f in source] == []


def test_cuda_expressions_compile(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not on PATH or in /usr/local/cuda/bin")
    cu = tmp_path / "ops.cu"
    cu.write_text(cuda_source())
    compile_fp32_only(nvcc, cu, tmp_path)


# The fp64 instructions of CUDA's own sinf / cosf / tanf: their slow path for |x| > 105615 (Payne-
# Hanek reduction) converts the reduced 64-bit integer to double and multiplies it by pi / 2^64,
# as in torch's kernels, which call the same functions. No other fp64 instruction is allowed.
LIBRARY_FP64 = re.compile(r"^\s*(cvt\.rn\.f64\.s64|cvt\.rn\.f32\.f64|mul\.f64\s+%fd\d+, %fd\d+, 0d3BF921FB54442D19;)")


def compile_fp32_only(nvcc: str, cu, tmp_path) -> None:
    """Compile `cu` for sm_90a with every warning an error, and check its PTX: no fp64 instruction
    but CUDA's own trigonometric slow path (LIBRARY_FP64). A literal without its 'f' would make an
    op compute in fp64."""
    keep = tmp_path / "keep"
    keep.mkdir()
    proc = subprocess.run([nvcc, "-c", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                           "-Werror", "all-warnings", "--keep", "--keep-dir", str(keep),
                           str(cu), "-o", str(tmp_path / (cu.stem + ".o"))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = list(keep.glob("*.ptx"))
    assert len(ptx) == 1, ptx
    fp64 = [line for line in ptx[0].read_text().splitlines()
            if re.search(r"\.f64\b", line) and not line.strip().startswith(".reg")
            and not LIBRARY_FP64.match(line)]
    assert fp64 == [], fp64[:10]


# ----------------------------------------------------------------------------------------------
# 3. fp32 literals.

def test_cuda_float_round_trips():
    rng = numpy.random.default_rng(0)
    values = [0.1, 1 / 3, -2.5, 2.0, 1.0, 0.0, 1e-45, 1.4e-45, 1e-40, 1.17549435e-38, -1e-7,
              3.4028234663852886e38, 1e38, 123456789.0, 16777217.0, math.pi, math.e, 0.044715,
              math.sqrt(0.5), math.sqrt(2 / math.pi), 1.6732632423543772848170429916717, 7, -3]
    values += list(rng.standard_normal(500) * 10.0 ** rng.integers(-40, 38, 500))
    for value in values:
        literal = cuda_float(value)
        assert re.fullmatch(r"-?\d+(\.\d*)?(e[+-]\d+)?f", literal) and re.search(r"[.e]", literal), literal
        # Read back as the compiler reads it, to the nearest fp32 (as a double it differs:
        # 0.100000001 is not 0.100000001490116...).
        assert numpy.float32(float(literal.rstrip("f"))) == numpy.float32(value), (value, literal)


def test_cuda_float_examples_and_special_values():
    assert cuda_float(0.1) == "0.100000001f"
    assert cuda_float(2.0) == "2.0f"
    assert cuda_float(-0.0) == "-0.0f"
    assert cuda_float(INF) == "INFINITY"
    assert cuda_float(-INF) == "-INFINITY"
    assert cuda_float(NAN) == "NAN"
    assert cuda_float(1e39) == "INFINITY"  # beyond fp32's range: rounds to infinity
    assert cuda_float(-1e39) == "-INFINITY"
    assert cuda_float(1e-50) == "0.0f"  # below fp32's smallest subnormal: rounds to zero
    assert cuda_float(numpy.float32(0.25)) == "0.25f"
    for bad in ("0.1", True, None):
        with pytest.raises(TypeError):
            cuda_float(bad)


# ----------------------------------------------------------------------------------------------
# 4. Refusals name what they refuse.

@pytest.mark.parametrize("apply", [cuda_expr, torch_apply], ids=["cuda_expr", "torch_apply"])
def test_bad_requests_are_refused_by_name(apply):
    x = ["a"] if apply is cuda_expr else [torch.zeros(3)]
    with pytest.raises(ValueError, match="'softmaxx'"):
        apply("softmaxx", x, {})
    with pytest.raises(ValueError, match="'slope'"):
        apply("leaky_relu", x, {"slope": 0.1})
    with pytest.raises(ValueError, match="'beta'"):
        apply("relu", x, {"beta": 1.0})
    with pytest.raises(ValueError, match="'exponent'"):
        apply("pow", x, {})
    with pytest.raises(ValueError, match="'other'"):
        apply("minimum_const", x, {})
    with pytest.raises(ValueError, match="'min' or 'max'"):
        apply("clamp", x, {})
    with pytest.raises(ValueError, match="approximate"):
        apply("gelu", x, {"approximate": "fast"})
    with pytest.raises(ValueError, match="alpha"):
        apply("elu", x, {"alpha": "1.0"})
    with pytest.raises(ValueError, match="2 operand"):
        apply("add", x, {})


# ----------------------------------------------------------------------------------------------
# 5. GPU: the CUDA expressions are as accurate as torch's fp32 kernels.

def gpu_inputs(device) -> tuple[torch.Tensor, torch.Tensor]:
    """4096 values over -30..30 and the special points; the second operand is a permutation."""
    special = [0.0, -0.0, 1e-3, -1e-3, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0, 20.0, -20.0, 1e-30,
               -1e-30, 100.0, -100.0, INF, -INF, NAN]
    x = torch.cat([torch.linspace(-30, 30, 4096), torch.tensor(special)]).float()
    y = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(2))]
    return x.to(device), y.to(device)


def build_extension(build_dir):
    from torch.utils.cpp_extension import load_inline

    wrapper = f"""
torch::Tensor run_ops(torch::Tensor a, torch::Tensor b) {{
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat &&
              b.scalar_type() == torch::kFloat && a.is_contiguous() && b.is_contiguous() &&
              a.numel() == b.numel(), "run_ops takes two contiguous float32 CUDA tensors of one size");
  const int n = static_cast<int>(a.numel());
  auto out = torch::empty({{{len(VARIANTS)}, n}}, a.options());
  all_ops<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "all_ops: ", cudaGetErrorString(err));
  return out;
}}
"""
    source = cuda_source() + wrapper
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return load_inline(name=f"kgen_ops_test_{digest}",
                       cpp_sources="torch::Tensor run_ops(torch::Tensor a, torch::Tensor b);",
                       cuda_sources=source, functions=["run_ops"],
                       extra_cuda_cflags=["-O3", "-std=c++17"], build_directory=str(build_dir))


@pytest.mark.gpu
def test_cuda_expressions_are_as_accurate_as_torch(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    module = build_extension(tmp_path)
    x, y = gpu_inputs("cuda")
    ours_all = module.run_ops(x, y).double()
    failures, report = [], []
    for v, (name, attrs) in enumerate(VARIANTS):
        ours = ours_all[v]
        ref = torch_apply(name, operands_of(name, [x.double(), y.double()]), attrs)  # fp64 on the fp32 inputs
        theirs = torch_apply(name, operands_of(name, [x, y]), attrs).double()  # torch's fp32 kernel
        ref32 = ref.float().double()  # what fp32 can hold: beyond its range, infinity
        finite = torch.isfinite(ref32)
        # Where fp32 cannot hold the answer (NaN, infinity), ours must give exactly that.
        same = (ours == ref32) | (ours.isnan() & ref32.isnan())
        if not same[~finite].all() or not ours[finite].isfinite().all():
            bad = (~same & ~finite) | (finite & ~ours.isfinite())
            failures.append(f"{variant_id((name, attrs))}: non-finite mismatch at x={x[bad][:5].tolist()}, "
                            f"y={y[bad][:5].tolist()}: ours {ours[bad][:5].tolist()}, fp64 {ref[bad][:5].tolist()}")
            continue
        if not bool(finite.any()):   # (floor_divide by 0: every answer infinite or NaN, matched above)
            report.append(f"{variant_id((name, attrs)):40s} every answer non-finite, ours exactly fp64's")
            continue
        torch_ok = finite & theirs.isfinite()
        err_ours = (ours - ref)[finite].abs().max().item()
        err_torch = (theirs - ref)[torch_ok].abs().max().item()
        scale = ref[finite].abs().max().item()
        # Relative to the size of the answer (2^-126, fp32's smallest normal, for a zero one).
        size = ref.abs().clamp_min(2.0 ** -126)
        rel_ours = ((ours - ref).abs() / size)[finite].max().item()
        rel_torch = ((theirs - ref).abs() / size)[torch_ok].max().item()
        report.append(f"{variant_id((name, attrs)):40s} abs ours {err_ours:.3e} torch {err_torch:.3e}"
                      f"  rel ours {rel_ours:.3e} torch {rel_torch:.3e}  scale {scale:.3e}")
        if err_ours > 4 * err_torch + 1e-7 * scale:
            failures.append(f"{variant_id((name, attrs))}: max abs error {err_ours:.3e}, torch's "
                            f"{err_torch:.3e} (scale {scale:.3e})")
        if rel_ours > 4 * rel_torch + 2.0 ** -22:
            failures.append(f"{variant_id((name, attrs))}: max relative error {rel_ours:.3e}, "
                            f"torch's {rel_torch:.3e}")
    print("\n".join(report))
    assert failures == [], "\n".join(failures)
