"""What session 58's probe of dtype spellings around a GEMM + epilogue found (CPU; the generated
driver: upcasts for softmax / norms, dtype-dependent constants, modules built in a dtype with
fp32 buffers, autocast in forward, casts in the epilogue; each traced, its IR run against the
module in fp32, bf16 and fp16 (module.to(dtype), or the module's own dtype) and `kgen generate
--dtype` run on it). Not repeated here: session 55's cases (tests/test_spellings_probe55_dtype.py).

Fixed:
- (WRONG output dtype under autocast) a cast to another value's dtype, `self.b.to(y.dtype)`,
  `self.b.type_as(y)`, `self.s.to(dt)` after `dt = y.dtype`, was read by kgen.frontend.autocast
  as the parameter's own kind ("param": fp32 in an fp32 module), where eager's result is y's
  16-bit dtype under autocast; and `y.to(self.fc.weight.dtype)` as y's (16-bit), where eager's is
  the fp32 weight's. The file handed the output over in the other dtype. Now the cast's target
  value's kind (autocast.node_kind).
- (WRONG trace) `@torch.autocast('cuda', dtype=torch.bfloat16)` on forward was taken, on a
  machine without a GPU, as an fp32 module: torch turns CUDA's autocast off there when the
  decorator is made, at the file's import, before the tracer watched autocast's __init__. Now every
  autocast the reference makes records what it asked for (autocast.asked_enabled), and the
  decorator is refused as the `with` is.
- (WRONG under a caller's autocast) `with torch.autocast('cuda', enabled=False): y = self.fc(x)`
  in an fp32 module was taken as if absent: inside a caller's autocast region the file computed
  the GEMM in 16 bits where eager computes it in float32. Now a float32 fact (Graph.fp32_casts):
  the file runs fp32 modules and computes in fp32 under autocast. A region around epilogue ops
  only pins nothing, and its ops are read as running in their operands' dtypes (AUTOCAST_OFF).
- (easy things refused) `y.to(x)` / `y.to(self.fc.weight)` (to another tensor's dtype and
  device), `y.to(x.dtype, copy=True)` (now a copy, no alias), `y.to(memory_format=...)`,
  `torch.full_like(y, c, dtype=y.dtype)`, `zeros_like(y, device=y.device)`,
  `y.new_full(y.shape, c, dtype=y.dtype)`, `y.new_tensor(c, dtype=torch.float32)` were refused;
  `full_like(..., dtype=torch.float32)` in an fp32 module is taken and makes the file fp32-only.
  The refusals that remain say the module's dtype (they said "the input's fp32" in a bf16 module).
- (unclear messages) `@torch.amp.custom_fwd` on forward: "the forward changes self._dtype";
  `y.type(torch.FloatTensor)`: fx's "argument of type: <class 'torch.tensortype'>".

Left (reported, not fixed): `.to(y.dtype)` of an fp32 buffer in a 16-bit module is traced as
the buffer itself (the oracle's output fp32, eager's bf16; the emitted file refuses the fp32
buffer outside autocast at run time); `.to(torch.bfloat16)` in a bf16 module is taken as a
no-op where `.bfloat16()` is refused (the file's fp32 build would not convert; refused alike since
session 61, tests/test_spellings_probe61_half.py).
"""

import copy
import warnings

import pytest
import torch

from kgen.frontend import autocast as ac
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from conftest import reference_text
from test_spellings_ops import canonical

B = "self.b = nn.Parameter(torch.randn(out_features))"
S = "self.register_buffer('s', torch.rand(out_features) + 0.5)"
LIN = "self.fc = nn.Linear(in_features, out_features)"


def ref(tmp_path, body: list[str], init=(), name="ref", decorator="") -> Reference:
    """A module whose forward runs `body` (its last line sets x) after `y = self.fc(x)`."""
    text = reference_text([LIN, *init], ["y = self.fc(x)", *body], out_features=24)
    if decorator:
        text = text.replace("    def forward(self, x):", f"    {decorator}\n    def forward(self, x):")
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (CUDA's autocast, disabled without a GPU)
        return Reference(path)


def traced(r: Reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return trace(r)


# ---- 1. the output's dtype under autocast: a cast to another value's dtype --------------------
# body -> (init, the autocast kind of the output)
AUTOCAST_CASTS = {
    "b.to(y.dtype)": ([B], "x = torch.relu(y + self.b.to(y.dtype))", ()),
    "b.type_as(y)": ([B], "x = torch.relu(y + self.b.type_as(y))", ()),
    "b.to(dtype=y.dtype)": ([B], "x = torch.relu(y + self.b.to(dtype=y.dtype))", ()),
    "b.to(y.device, y.dtype)": ([B], "x = torch.relu(y + self.b.to(y.device, y.dtype))", ()),
    "b.to(y)": ([B], "x = torch.relu(y + self.b.to(y))", ()),
    "dt = y.dtype; s.to(dt)": ([S], "dt = y.dtype\nx = y * self.s.to(dt)", ()),
    "b.to(x.dtype)": ([B], "x = torch.relu(y + self.b.to(x.dtype))", ("input",)),
    "b.type_as(x)": ([B], "x = torch.relu(y + self.b.type_as(x))", ("input",)),
    "y + b": ([B], "x = torch.relu(y + self.b)", ("param",)),
    "y.to(w.dtype)": ([], "x = torch.relu(y).to(self.fc.weight.dtype)", ("param",)),
    "y.type_as(w)": ([], "x = torch.relu(y).type_as(self.fc.weight)", ("param",)),
    "y.to(x.device)": ([], "x = torch.relu(y).to(x.device)", ()),
    # (.item() of a (1,) parameter is a Python number, which promotes nothing; the parameter would)
    "y * s.item()": (["self.s = nn.Parameter(torch.tensor([0.5]))"], "x = torch.relu(y) * self.s.item()", ()),
    "y + buffer.item()": (["self.register_buffer('s', torch.tensor([[0.5]]))"], "x = y + self.s.item()", ()),
    "y * s": (["self.s = nn.Parameter(torch.tensor([0.5]))"], "x = torch.relu(y) * self.s", ("param",)),
}


@pytest.mark.parametrize("name", sorted(AUTOCAST_CASTS))
def test_a_cast_to_another_values_dtype_has_that_values_dtype_under_autocast(name, tmp_path):
    """Before: b.to(y.dtype) / b.type_as(y) read as the fp32 parameter ("param": an fp32 output
    where eager's is bf16), y.to(W.dtype) as y (bf16 where eager's is fp32). The kind is checked
    against eager under CPU's bf16 autocast (its Linear is bf16 too; these ops promote alike)."""
    init, body, kind = AUTOCAST_CASTS[name]
    r = ref(tmp_path, body.splitlines(), init)
    graph = traced(r)
    assert graph.autocast_output == kind
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.rand(8, 16))
    assert out.dtype == (torch.float32 if ac.output_is_fp32(kind, True, True) else torch.bfloat16)


# ---- 2. autocast in forward ---------------------------------------------------------------------
def test_an_autocast_decorator_on_forward_is_refused_without_a_gpu(tmp_path):
    """Before: taken as an fp32 module (torch disables CUDA's autocast where no GPU is, at the
    decorator's making, when the file is imported)."""
    r = ref(tmp_path, ["x = torch.relu(y)"], decorator="@torch.autocast('cuda', dtype=torch.bfloat16)")
    with pytest.raises(Unsupported, match=r"forward's decorator: torch\.autocast in forward"):
        traced(r)


@pytest.mark.parametrize("spelling", ["with", "decorator"])
def test_autocast_off_around_the_gemm_makes_the_file_fp32_only(spelling, tmp_path):
    """Inside a caller's autocast, eager computes that GEMM in float32; the build for autocast
    would compute it in 16 bits. Before: taken as if the region were absent."""
    if spelling == "with":
        text = reference_text([LIN], ["with torch.autocast('cuda', enabled=False):", "    y = self.fc(x)",
                                      "x = torch.relu(y)"], out_features=24)
    else:
        text = reference_text([LIN], ["y = self.fc(x)", "x = torch.relu(y)"], out_features=24).replace(
            "    def forward(self, x):", "    @torch.autocast('cuda', enabled=False)\n    def forward(self, x):")
    path = tmp_path / "off.py"
    path.write_text(text)
    graph = traced(Reference(path))
    assert len(graph.fp32_casts) == 1 and "turns torch.autocast off around its GEMM" in graph.fp32_casts[0][2]


def test_autocast_off_around_epilogue_ops_pins_nothing_and_keeps_their_dtype(tmp_path):
    """Ops in the region run in their operands' dtypes under a caller's autocast (softmax of a
    bf16 Linear output: bf16, not autocast's fp32 softmax)."""
    graph = traced(ref(tmp_path, ["with torch.autocast('cuda', enabled=False):", "    x = torch.softmax(y, -1)"]))
    assert graph.fp32_casts == [] and graph.autocast_output == ()
    graph = traced(ref(tmp_path, ["x = torch.softmax(y, -1)"], name="plain"))
    assert graph.autocast_output == ("fp32",)


@pytest.mark.parametrize("decorator", ["@torch.amp.custom_fwd(device_type='cuda')",
                                       "@torch.amp.custom_fwd(device_type='cuda', cast_inputs=torch.float32)",
                                       "@torch.cuda.amp.custom_fwd"])
def test_custom_fwd_on_forward_says_what_it_is(decorator, tmp_path):
    """Before: "the forward changes self._dtype: state kept from call to call"."""
    with pytest.raises(Unsupported, match=r"decorated with torch\.amp\.custom_fwd.*drop the decorator"):
        traced(ref(tmp_path, ["x = torch.relu(y)"], decorator=decorator))


# ---- 3. casts kgen now takes --------------------------------------------------------------------
# spelling -> the plain one it traces as
TAKEN = {
    "y.to(x)": ("x = torch.relu(y).to(x)", "x = torch.relu(y)"),
    "y.to(self.fc.weight)": ("x = torch.relu(y).to(self.fc.weight)", "x = torch.relu(y)"),
    "y.to(y)": ("x = torch.softmax(y.to(y), -1)", "x = torch.softmax(y, -1)"),
    "b.to(y)": ("x = y + self.b.to(y)", "x = y + self.b"),
    "to(memory_format)": ("x = torch.relu(y).to(memory_format=torch.contiguous_format)", "x = torch.relu(y)"),
    "to(copy=True)": ("x = torch.relu(y).to(x.dtype, copy=True)", "x = torch.relu(y)"),
    "full_like(dtype=y.dtype)": ("x = y * torch.full_like(y, 3, dtype=y.dtype)", "x = y * 3.0"),
    "zeros_like(device=y.device)": ("x = torch.where(y > 0, y, torch.zeros_like(y, device=y.device))",
                                    "x = torch.where(y > 0, y, torch.zeros_like(y))"),
    "new_full(shape, dtype=y.dtype)": ("x = y * y.new_full(y.shape, 2.0, dtype=y.dtype)", "x = y * 2.0"),
    "new_tensor(dtype=float32)": ("x = y * y.new_tensor(0.5, dtype=torch.float32)", "x = y * 0.5"),
    "new_zeros((), dtype=float32)": ("x = torch.maximum(y, y.new_zeros((), dtype=torch.float32))",
                                     "x = torch.maximum(y, y.new_zeros(()))"),
}


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_casts_and_made_tensors_in_the_modules_dtype_are_taken(name, tmp_path):
    """Before: refused ("to one kgen cannot read (a tensor's)", "with dtype, device or
    requires_grad (kgen computes in the input's fp32)")."""
    spelled, plain = TAKEN[name]
    a = traced(ref(tmp_path, spelled.splitlines(), [B], name="spelled"))
    b = traced(ref(tmp_path, plain.splitlines(), [B], name="plain"))
    assert canonical(a.describe()) == canonical(b.describe())
    assert a.fp32_casts == []


def test_a_copy_made_by_to_is_no_alias(tmp_path):
    """z = y.to(y.dtype, copy=True); z.mul_(2) leaves y alone (y.to(y.dtype) without copy: z is y)."""
    for body, factor in (("z = y.to(y.dtype, copy=True)", 3.0), ("z = y.to(y.dtype)", 4.0)):
        r = ref(tmp_path, [body, "z.mul_(2.0)", "x = y + z"], name=f"copy{int(factor)}")
        graph = traced(r)
        torch.manual_seed(0)
        model = r.Model(*r.init_args())
        x = torch.rand(8, 16)
        with torch.no_grad():
            torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), model.fc(x) * factor)
            torch.testing.assert_close(model(x), model.fc(x) * factor)


@pytest.mark.parametrize("body", ["x = y * torch.full_like(y, 3, dtype=torch.float32)",
                                  "x = y + y.new_zeros(y.shape, dtype=torch.float32)"])
def test_a_float32_tensor_made_in_forward_makes_the_file_fp32_only(body, tmp_path):
    """In a 16-bit module the float32 tensor promotes what it meets, as a cast to float32 does."""
    assert len(traced(ref(tmp_path, [body])).fp32_casts) == 1


@pytest.mark.parametrize("body, what", [
    ("x = y * y.new_tensor(0.5, dtype=torch.int64)", r"\.new_tensor\(\) with dtype=torch\.int64"),
    ("x = y + torch.zeros_like(y, dtype=torch.bool)", r"torch\.zeros_like with dtype=torch\.bool"),
])
def test_a_tensor_made_in_another_dtype_says_the_modules(body, what, tmp_path):
    with pytest.raises(Unsupported, match=what + r" in a torch\.float32 module \(kgen computes in the module's dtype"):
        traced(ref(tmp_path, [body]))


def test_a_tensor_type_argument_says_to_name_the_dtype(tmp_path):
    """Before: fx's "NotImplementedError: argument of type: <class 'torch.tensortype'>"."""
    with pytest.raises(Unsupported, match=r"a tensor type as an argument.*name the dtype"):
        traced(ref(tmp_path, ["x = torch.relu(y).type(torch.FloatTensor)"]))


@pytest.mark.parametrize("body", ["x = y * y.new_tensor(0.1, dtype=torch.bfloat16)",
                                  "x = y * y.new_full((), 0.1, dtype=torch.float16)",
                                  "x = y * y.new_tensor(0.1, dtype=torch.float64)"])
def test_a_one_element_tensor_made_in_a_16_bit_dtype_holds_the_rounded_number(body, tmp_path):
    """y.new_tensor(0.1, dtype=torch.bfloat16) holds 0.10009765625, which an fp32 forward multiplies
    by (a 0-d tensor promotes nothing): the IR's number is that one, not 0.1 (a 1e-3 relative error,
    past fp32's tolerance), as torch.tensor(0.1, dtype=torch.bfloat16) made in forward is read."""
    r = ref(tmp_path, [body])
    graph = traced(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    x = torch.rand(8, 16)
    with torch.no_grad():
        torch.testing.assert_close(graph.interpret(x, copy.deepcopy(model)), model(x), rtol=1e-6, atol=1e-6)


# ---- 4. values torch makes float32 whatever the module's dtype ----------------------------------
# A comparison (a bool) combined with a Python float, and torch.where of two Python numbers one of
# them a float, are tensors of torch's default dtype, float32, which promote a 16-bit y: eager's
# output is then float32 (checked here in bf16 on the CPU), and kgen's file, which kept the
# module's dtype, handed a bf16 output of other values. They are float32 facts now (the file runs
# float32 modules, and says why for a 16-bit one), as nan_to_num's default bounds are. Of two ints,
# torch.where is an int64 tensor (Tracer.integer_values), whose sums and products with ints stay
# integers and which a Python float, a division or a float op makes float32; with a float tensor,
# or with a tensor branch, the module's dtype holds.
FLOAT32_MADE = {   # x = ...
    "y * ((y > 0) * 0.1)": True,
    "y + 0.5 * (y <= 0.2)": True,
    "y * torch.where(y > 0, 1.0, -1.0)": True,
    "y + torch.where(y > 0, 1, 0.5)": True,
    "y * (y > 0) * 0.1": False,   # ((y * (y > 0)) * 0.1: the bool meets y first)
    "y * torch.where(y > 0, 1, -1)": False,
    "y + torch.where(y > 0, 1, -1) * 0.5": True,   # (an int64 tensor, then float32)
    "y + torch.where(y > 0, 3, 0) / 2": True,
    "y * torch.exp(torch.where(y > 0, 1, 0))": True,
    "y + (torch.where(y > 0, 1, 0) + 1) * 2 - 1": False,   # (integers throughout, then y's)
    "y + torch.where(y > 0, 1, 0) * y * 0.5": False,
    "torch.where(y > 0, y, 0.0)": False,
    "y * ((y > 0).to(y.dtype) * 0.1)": False,
}


@pytest.mark.parametrize("spelling", FLOAT32_MADE)
def test_values_torch_makes_in_float32_are_float32_facts(spelling, tmp_path):
    made = FLOAT32_MADE[spelling]
    r = ref(tmp_path, [f"x = {spelling}"])
    m = r.Model(*r.init_args()).to(torch.bfloat16)
    with torch.no_grad():
        eager = m(torch.randn(4, r.input.shape[1]).to(torch.bfloat16))
    assert (eager.dtype == torch.float32) == made   # (torch's rule, as kgen reads it)
    graph = traced(r)
    assert bool(graph.fp32_casts) == made, graph.fp32_casts
    if made:
        assert "float32 tensor in torch (its default dtype)" in graph.fp32_casts[0][2]
