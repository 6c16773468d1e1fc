"""What session 55's probe of dtypes inside reference modules found (CPU; the driver:
docs/experiments/s55/dtype_probe.py, which runs each case's IR against the module in its own dtype,
then `kgen generate`, the emitted file's construction under one seed and KernelBench's static checker).

Taken, the oracle matching the module in its dtype, and generated (file built as the reference,
static checker clean): a module built in bf16 / fp16 by nn.Linear(dtype=), self.to(dtype) or
fc.to(dtype) in __init__ or a `dtype` constructor argument (inputs in that dtype); an fp32
LayerNorm, BatchNorm, bias or 0-d parameter in a 16-bit module; .to(x.dtype), .type_as(x),
.to(self.fc.weight.dtype); torch.tensor(c, dtype=x.dtype) / (device=x.device, dtype=x.dtype),
x.new_tensor(c), full_like / zeros_like; autocast(enabled=False) in forward; in an fp32 module
.float(), softmax(y.float()).to(y.dtype), .to(torch.get_default_dtype()) (no-ops; Graph.fp32_casts).

No wrong result, no traceback. Found:
- (4) `.float()` (and .double(), .to(torch.get_default_dtype()), .to(tensor)) in a 16-bit module,
  the common "upcast for softmax / norm, cast back" pattern, was refused as "the tensor method
  .float() is not supported", which it is, in fp32 modules: now the message says the cast leaves the
  module's dtype and what to do. Fixed (trace.Tracer.visit_method).
- (4) `.half()` in an fp16 module / `.bfloat16()` in a bf16 one (a no-op there): the same message;
  now it says why (the file also runs the other dtypes, where it converts) and offers .to(x.dtype).
- (4) `torch.finfo(x.dtype).min` / `.eps` (attention-style masks): fx's "TypeError: torch.finfo()
  requires a floating point input type. Use torch.iinfo"; now it says the number depends on the
  dtype the module runs in and to write the number (trace.FX_FAILURES).
Left (refused, messages clear and naming the line): fp32 input to a 16-bit module (eager fails
too), a cast of the input before the GEMM, fp64 / int buffers, sum/softmax(dtype=float32) in a
16-bit module, torch.autocast in forward, a branch on a dtype, torch.tensor([c]).
Left (a deviation within the 16-bit tolerance): torch.tensor(c, dtype=x.dtype), x.new_tensor(c),
full_like(y, c) hold c rounded to the module's 16-bit dtype; kgen's IR and kernels use c itself
(y * bf16(0.1) vs y * 0.1: one step apart on ~20 % of the elements in bf16, ~35 % in fp16). One IR
serves every dtype, so the rounding would be a per-dtype constant (lowering), not a frontend change.
"""

import pytest

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from conftest import module_source


def ref(tmp_path, body: str, dtype: str | None = None) -> Reference:
    path = tmp_path / "ref.py"
    path.write_text(module_source(body, {}, out_features=24, dtype=dtype))
    return Reference(path)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("body", [
    "x = x.float()\nx = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
    "x = torch.tanh(x).to(torch.get_default_dtype())",
])
def test_an_upcast_in_a_16_bit_module_left_in_float32_is_refused_saying_why(body, dtype, tmp_path):
    """Before: "the tensor method .float() is not supported" (it is, in a float32 module). An
    upcast cast back before the output is taken since session 59 (tests/test_upcasts_16bit.py)."""
    with pytest.raises(Unsupported, match=rf"a cast to float32 in a torch\.{dtype} module is taken where the "
                                          r"forward casts back.*its output is torch\.float32") as e:
        trace(ref(tmp_path, body, dtype))
    assert "line 16" in str(e.value)


def test_the_same_upcast_in_a_float32_module_is_taken(tmp_path):
    # (cast back: no float32 fact since session 59, tests/test_upcasts_16bit.py; left in float32, one)
    assert not trace(ref(tmp_path, "x = torch.softmax(x.float(), dim=-1).to(x.dtype)")).fp32_casts
    assert len(trace(ref(tmp_path, "x = torch.softmax(x.float(), dim=-1)")).fp32_casts) == 1


@pytest.mark.parametrize("dtype, cast", [("bfloat16", "bfloat16"), ("float16", "half")])
def test_a_cast_naming_the_modules_own_16_bit_dtype_says_why(dtype, cast, tmp_path):
    with pytest.raises(Unsupported, match=rf"\.{cast}\(\) in a torch\.{dtype} module: a cast that names the "
                                          r"module's dtype.*write \.to\(x\.dtype\)"):
        trace(ref(tmp_path, f"x = torch.relu(x).{cast}()", dtype))


@pytest.mark.parametrize("expr", ["x.masked_fill(x < 0, torch.finfo(x.dtype).min)",
                                  "x / (x.abs().sum(-1, keepdim=True) + torch.finfo(x.dtype).eps)",
                                  "x.masked_fill(x < 0, torch.finfo(self.gemm.weight.dtype).min)"])
def test_finfo_of_a_traced_dtype_says_why(expr, tmp_path):
    """Before: fx's "torch.finfo() requires a floating point input type. Use torch.iinfo"."""
    with pytest.raises(Unsupported, match=r"line 16: .*torch\.finfo\(\) / torch\.iinfo\(\) of a traced value's "
                                          r"dtype.*write the number"):
        trace(ref(tmp_path, f"x = {expr}", "bfloat16"))
