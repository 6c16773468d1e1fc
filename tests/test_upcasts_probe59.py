"""Session 59's probe of the upcast spellings real codebases write (CPU), generated: a Linear,
then an upcast block as Hugging Face and others write it (Llama / Mistral RMSNorm, Cohere's and
Gemma's RMSNorm with `self.weight.float()`, T5LayerNorm, softmax / log_softmax / logsumexp / GELU /
SiLU / tanh / F.layer_norm / F.normalize / torch.var / var_mean / in-place ops on the upcast value),
each upcast spelling (.float(), .to(torch.float32), .to(dtype=torch.float32), .type(torch.float32),
.to(torch.get_default_dtype())) and cast back (.to(input_dtype), .to(x.dtype), .type_as(x),
.to(self.weight.dtype), .half(), .bfloat16(), .to(torch.bfloat16)), in a module built in bf16 /
fp16 or a float32 module converted (model.to(dtype)), its parameters in the module's dtype or kept
in float32. The driver /tmp/p59 ran 784 such modules; this file runs a covering sample: every block
in every module dtype with the plain spellings, each other spelling on a few blocks.

Taken: the IR's output against eager and fp64 at input scales 1, 100 and 600 (fp16's overflow of
x.pow(2)), its dtype eager's, and its Node.fp32 marks exactly the values the oracle (torch's own
promotions) holds in float32. Refused: the message, where eager's output is another dtype than the
module's (an fp32 parameter times the cast-back value), a 16-bit dtype named literally (.half() in
an fp16 module: the file runs every dtype; another 16-bit dtype: kgen's output is the module's), or
a branch on a parameter's dtype (T5LayerNorm: kgen traces one path).

Fixed in session 59's probe:
- `self.weight.float()` was the parameter itself: Gemma's `output * (1.0 + self.weight.float())`
  added 1.0 in the module's dtype (unmarked, rounded by a 16-bit build), where eager adds in fp32;
  F.layer_norm(h, ..., self.weight.float(), self.bias.float()) on a 16-bit module's upcast value was
  refused ("torch refuses the mixed dtypes", which it does not, the parameters being cast), and in
  a float32 module converted to 16 bits the oracle raised (a float32 input, 16-bit weights). Now a
  to_float32 node of the parameter, and a norm node's affine_fp32 (Tracer._cast, _affine_paths).
- An in-place op on the upcast value (`h = x.float(); h.mul_(...)`, `h += 0.5`) was refused as an
  alias across a conversion: `input_dtype = x.dtype` read before it is recorded by torch.fx where
  the name is first used, after the write, and was taken for a read of x's values; and x, not read
  again, is its copy (16-bit) or itself (float32) alike. Now a read of a tensor's dtype, device or
  shape is no read of its values (trace._reads_values), and an alias across a conversion that is
  not read again is left as it is (Tracer._write).
"""

import copy
import itertools
import re
import textwrap
import warnings

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

UPS = {
    "float": "{v}.float()",
    "to32": "{v}.to(torch.float32)",
    "to_dtype32": "{v}.to(dtype=torch.float32)",
    "type32": "{v}.type(torch.float32)",
    "default": "{v}.to(torch.get_default_dtype())",
}
BACKS = {
    "to_input_dtype": "{v}.to(input_dtype)",
    "to_x_dtype": "{v}.to(x.dtype)",
    "type_as": "{v}.type_as(x)",
    "to_w_dtype": "{v}.to({w}.dtype)",
    "half": "{v}.half()",
    "bfloat16": "{v}.bfloat16()",
    "to_bf16": "{v}.to(torch.bfloat16)",
}
W = "self.weight = nn.Parameter((1 + 0.1 * torch.randn(out_features)){pdt})"
WB = [W, "self.bias = nn.Parameter((0.1 * torch.randn(out_features)){pdt})"]
G = "self.weight = nn.Parameter((0.1 * torch.randn(out_features)){pdt})"
RMS = "h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)"
# name -> (init lines, extra methods, body lines with {UP:v} / {BACK:v}, axes used)
BLOCKS = {
    "llama_rmsnorm": ([W], "", """
        input_dtype = x.dtype
        h = {UP:x}
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + 1e-6)
        x = self.weight * {BACK:h}"""),
    "cohere_rmsnorm": ([W], "", """
        input_dtype = x.dtype
        h = {UP:x}
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + 1e-6)
        h = {UP:self.weight} * h
        x = {BACK:h}"""),
    "gemma_rmsnorm": ([G], """
    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
""", """
        input_dtype = x.dtype
        output = self._norm({UP:x})
        output = output * (1.0 + {UP:self.weight})
        x = {BACK:output}"""),
    "t5_layernorm": ([W], "", """
        variance = {UP:x}.pow(2).mean(-1, keepdim=True)
        h = x * torch.rsqrt(variance + 1e-6)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            h = h.to(self.weight.dtype)
        x = self.weight * h"""),
    "softmax_dtype_arg": ([], "", """
        input_dtype = x.dtype
        h = F.softmax(x, dim=-1, dtype=torch.float32)
        x = {BACK:h}"""),
    "softmax_method": ([], "", """
        input_dtype = x.dtype
        h = {UP:x}.softmax(-1)
        x = {BACK:h}"""),
    "log_softmax": ([], "", """
        input_dtype = x.dtype
        h = F.log_softmax({UP:x}, dim=-1)
        x = {BACK:h}"""),
    "logsumexp_sub": ([], "", """
        input_dtype = x.dtype
        h = {UP:x}
        h = h - torch.logsumexp(h, dim=-1, keepdim=True)
        x = {BACK:h}"""),
    "gelu": ([], "", """
        input_dtype = x.dtype
        x = {BACK:F.gelu({UP:x})}"""),
    "silu": ([], "", """
        input_dtype = x.dtype
        h = F.silu({UP:x})
        x = {BACK:h}"""),
    "tanh": ([], "", """
        input_dtype = x.dtype
        h = torch.tanh({UP:x})
        x = {BACK:h}"""),
    "layer_norm": (WB, "", """
        input_dtype = x.dtype
        h = F.layer_norm({UP:x}, (x.shape[-1],), {UP:self.weight}, {UP:self.bias}, 1e-5)
        x = {BACK:h}"""),
    "normalize": ([], "", """
        input_dtype = x.dtype
        h = torch.nn.functional.normalize({UP:x}, dim=-1)
        x = {BACK:h}"""),
    "var": ([], "", """
        input_dtype = x.dtype
        h = {UP:x}
        v = torch.var(h, -1, unbiased=False, keepdim=True)
        h = (h - h.mean(-1, keepdim=True)) * torch.rsqrt(v + 1e-5)
        x = {BACK:h}"""),
    "var_mean": ([], "", """
        input_dtype = x.dtype
        h = {UP:x}
        v, m = torch.var_mean(h, -1, unbiased=False, keepdim=True)
        h = (h - m) * torch.rsqrt(v + 1e-5)
        x = {BACK:h}"""),
    "inplace": ([W], "", """
        input_dtype = x.dtype
        h = {UP:x}
        h.mul_(torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
        h += 0.5
        h *= self.weight
        x = {BACK:h}"""),
}
# (module dtype name) -> (the dtype it runs in, the dtype it is built in: None that one)
DTYPES = {"bf16": ("bfloat16", None), "fp16": ("float16", None),
          "fp32>bf16": ("bfloat16", "float32"), "fp32>fp16": ("float16", "float32")}

TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features{mdt})
{init}
{methods}
    def forward(self, x):
        x = self.gemm(x)
{body}
        return x


def get_inputs():
    return [torch.rand(8, 16{mdt})]


def get_init_inputs():
    return [16, 24]
'''


def source(block, up, back, dt, pdt) -> str:
    """The reference file: `block` with upcast `up` and cast back `back` (None where the block
    spells its own), the module dtype `dt` (DTYPES), its parameters in the module's dtype ("mod")
    or float32 ("fp32")."""
    init, methods, body = BLOCKS[block]
    dtype, built = DTYPES[dt]
    built = built or dtype
    mdt = "" if built == "float32" else f", dtype=torch.{built}"
    p = "" if built == "float32" else (f".to(torch.{built})" if pdt == "mod" else ".to(torch.float32)")
    w = "self.weight" if init else "self.gemm.weight"
    body = textwrap.dedent(body).strip("\n")
    body = re.sub(r"\{UP:([^{}]+)\}", lambda m: UPS[up].format(v=m.group(1)), body)
    body = re.sub(r"\{BACK:([^{}]+)\}", lambda m: BACKS[back].format(v=m.group(1), w=w), body)
    return TEMPLATE.format(mdt=mdt, init="\n".join("        " + line.format(pdt=p) for line in init),
                           methods=methods, body=textwrap.indent(body, "        "))


def _axes(block):
    init, _, body = BLOCKS[block]
    return "{UP:" in body, "{BACK:" in body, bool(init)


def cases():
    """A covering sample: every block in every module dtype with .float() and .to(input_dtype)
    (and its parameters kept in float32 in a 16-bit built module), then each other upcast and
    cast back in every module dtype on a block of its own (in turn)."""
    out = []
    for block in BLOCKS:
        has_up, has_back, has_p = _axes(block)
        for dt in DTYPES:
            for pdt in (["mod", "fp32"] if has_p and DTYPES[dt][1] is None else ["mod"]):
                out.append((block, "float" if has_up else None, "to_input_dtype" if has_back else None, dt, pdt))
    with_up = [b for b in BLOCKS if _axes(b)[0] and _axes(b)[1]]
    with_back = [b for b in BLOCKS if _axes(b)[1]]
    for i, up in enumerate(u for u in UPS if u != "float"):
        for dt in DTYPES:
            out.append((with_up[(3 * i) % len(with_up)], up, "to_input_dtype", dt, "mod"))
    for i, back in enumerate(b for b in BACKS if b != "to_input_dtype"):
        for dt in DTYPES:
            out.append((with_back[(5 * i + 1) % len(with_back)], "float" if _axes(with_back[(5 * i + 1) % len(with_back)])[0]
                        else None, back, dt, "mod"))
    return out


LITERAL = {"half": "float16", "bfloat16": "bfloat16", "to_bf16": "bfloat16"}


def expected_refusal(block, up, back, dt, pdt) -> str | None:
    """The refusal a case gets (a regex of its message), None where it is taken; each judged right
    (the module docstring)."""
    dtype, built = DTYPES[dt]
    own = built or dtype
    if block == "t5_layernorm":
        return r"a branch on a traced value's dtype: kgen traces forward once for the float32, bfloat16 and float16"
    if back in LITERAL:
        name = BACKS[back].split(".")[1].split("(")[0]
        if LITERAL[back] != own:
            return rf"\.{name}\(\) to a dtype other than the module's \(torch\.{own}"
        # (.to(torch.bfloat16) too since session 61: taken as a no-op, the file's fp32 build did not convert)
        return rf"\.{name}\(\) in a torch\.{own} module: a cast that names the module's dtype"
    if pdt == "fp32" and (block == "llama_rmsnorm" or back == "to_w_dtype"):
        # (eager: the fp32 weight times the cast-back value, or a cast to its fp32: a float32 output)
        return rf"a cast to float32 in a torch\.{own} module .* its output is torch\.float32"
    return None


def _model(r: Reference, dt: torch.dtype):
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    return model.to(dt) if r.input.dtype == torch.float32 else model


def check_taken(r: Reference, graph, dt: torch.dtype) -> None:
    """The IR against eager and fp64 at three input scales; its fp32 marks against the dtypes the
    oracle's values have (torch's promotions: eager's)."""
    if r.input.dtype == torch.float32:
        assert not graph.fp32_casts, graph.fp32_casts   # (the file runs 16-bit modules)
    for scale in (1.0, 100.0, 600.0):
        model = _model(r, dt)
        torch.manual_seed(1)
        x = (torch.randn(8, 16) * scale).to(dt)
        with torch.no_grad():
            eager = model(x)
            got = graph.interpret(x, copy.deepcopy(model))
            exact = copy.deepcopy(model).double()(x.double())
        assert got.dtype == eager.dtype == dt
        error = lambda t: (t.double() - exact).abs().nan_to_num(1e30).max().item()   # noqa: E731
        step = torch.finfo(dt).eps * exact.abs().max().item()
        assert error(got) <= 2 * error(eager) + step, (scale, error(got), error(eager))
    values = graph.part_values(x, copy.deepcopy(model))
    for n in graph.live():
        v = values[n.id]
        if n.kind in ("pointwise", "reduce", "groupnorm") and isinstance(v, torch.Tensor) and v.dim():
            assert (v.dtype == torch.float32) == n.fp32, (n.id, n.op, n.fp32, v.dtype, graph.describe())


CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=["-".join(str(c) for c in case) for case in CASES])
def test_generated_upcast_module(case, tmp_path):
    path = tmp_path / "ref.py"
    path.write_text(source(*case))
    r = Reference(path)
    refusal = expected_refusal(*case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if refusal is not None:
            with pytest.raises(Unsupported, match=refusal):
                trace(r)
            return
        graph = trace(r)
    check_taken(r, graph, getattr(torch, DTYPES[case[3]][0]))


def test_every_block_and_spelling_is_sampled():
    assert {c[0] for c in CASES} == set(BLOCKS)
    assert {c[1] for c in CASES} - {None} == set(UPS)
    assert {c[2] for c in CASES} - {None} == set(BACKS)


# ---- the fixes, each on its own ----------------------------------------------------------------
@pytest.mark.parametrize("dt", ["bf16", "fp16"])
def test_a_parameters_upcast_is_a_to_float32_node(dt, tmp_path):
    """Gemma's `1.0 + self.weight.float()`: computed in float32 (Node.fp32), as eager computes it;
    before, the parameter itself, `1.0 + w` rounded to the module's dtype."""
    path = tmp_path / "ref.py"
    path.write_text(source("gemma_rmsnorm", "float", "type_as", dt, "mod"))
    graph = trace(Reference(path))
    (add,) = [n for n in graph.live() if n.op == "add" and n.level == "col"]
    assert add.fp32 and any(graph.node(a).op == "to_float32" for a in add.args), graph.describe()


@pytest.mark.parametrize("dt", ["bf16", "fp32>bf16"])
def test_layer_norm_of_upcast_parameters_is_taken(dt, tmp_path):
    """F.layer_norm(x.float(), ..., self.weight.float(), self.bias.float()): in a bf16 module it was
    refused as torch's mixed dtypes; in a float32 module converted to bf16 the oracle raised."""
    path = tmp_path / "ref.py"
    path.write_text(source("layer_norm", "float", "to_input_dtype", dt, "mod"))
    r = Reference(path)
    graph = trace(r)
    (norm,) = [n for n in graph.live() if n.kind == "groupnorm"]
    assert norm.fp32 and norm.attrs["affine_fp32"]
    check_taken(r, graph, torch.bfloat16)


def test_a_norm_of_16_bit_parameters_on_the_upcast_value_is_still_refused(tmp_path):
    path = tmp_path / "ref.py"
    path.write_text(source("layer_norm", "float", "to_input_dtype", "bf16", "mod").replace(
        "self.weight.float(), self.bias.float()", "self.weight, self.bias"))
    with pytest.raises(Unsupported, match="LayerNorm of a value in float32"):
        trace(Reference(path))


@pytest.mark.parametrize("back", ["to_input_dtype", "type_as", "to_x_dtype"])
def test_an_in_place_op_on_the_upcast_value_is_taken(back, tmp_path):
    """`input_dtype = x.dtype; h = x.float(); h.mul_(...)`: x is not read again (its dtype only)."""
    path = tmp_path / "ref.py"
    path.write_text(source("inplace", "float", back, "fp16", "mod"))
    graph = trace(Reference(path))
    assert graph.node(graph.output).op == "to_module_dtype"


@pytest.mark.parametrize("dt", ["bf16", "fp32"])
def test_an_in_place_op_across_a_conversion_whose_other_name_is_read_is_still_refused(dt, tmp_path):
    """(x read after h.mul_: in a float32 module it sees the write, in a bf16 one it does not)"""
    path = tmp_path / "ref.py"
    text = source("inplace", "float", "to_input_dtype", "bf16" if dt == "bf16" else "fp32>bf16", "mod")
    path.write_text(text.replace("x = h.to(input_dtype)", "x = h.to(input_dtype) + x"))
    with pytest.raises(Unsupported, match="shares its tensor with another through"):
        trace(Reference(path))


@pytest.mark.parametrize("case", [("gemma_rmsnorm", "float", "type_as", "bf16", "mod"),
                                  ("layer_norm", "to32", "to_input_dtype", "fp16", "mod"),
                                  ("inplace", "float", "to_input_dtype", "fp32>bf16", "mod")])
def test_the_fixed_spellings_generate(case, tmp_path):
    path, out = tmp_path / "ref.py", tmp_path / "new.py"
    path.write_text(source(*case))
    result = CliRunner().invoke(main, ["generate", str(path), "-o", str(out), "--force"])
    assert result.exit_code == 0, result.output
