"""Session 60's probe of 16-bit modules (CPU), generated. (Docstring completed below.)"""

import copy
import warnings

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir import ops
from kgen.ir.graph import Unsupported

from conftest import reference_text

LIN = "self.fc = nn.Linear(in_features, out_features)"


def ref(tmp_path, body: list[str], init=(), name="ref") -> Reference:
    """A module whose forward runs `body` (its last line sets x) after `y = self.fc(x)`."""
    path = tmp_path / f"{name}.py"
    path.write_text(reference_text([LIN, *init], ["y = self.fc(x)", *body], out_features=24))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Reference(path)


# ---- fixes, each on its own --------------------------------------------------------------------
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op, number", [("mul", 1e5), ("div", 1e-5), ("mul", 0.1), ("add", 0.1), ("sub", 1e5)])
def test_a_number_meets_a_16_bit_tensor_in_float32(op, number, dt):
    """torch's CUDA add / sub / mul / div read a Python number in float32 for a 16-bit tensor and
    round the result once, as kgen's kernels do. Before: the oracle rounded the number to the
    tensor's dtype first, so `y * 1e5` of an fp16 y was inf everywhere (1e5 is no fp16 number),
    and `y * 0.1` was y times bf16(0.1), 1e-3 off."""
    torch.manual_seed(0)
    y = (torch.randn(4096) * 0.3).to(dt)
    got = ops.torch_apply(op, [y, number])
    want = getattr(torch, op)(y.float(), number).to(dt)
    assert got.dtype == dt and torch.equal(got, want)
    got = ops.torch_apply(op, [number, y])   # (the number on the left: 1 - y, 1 / y)
    want = getattr(torch, op)(torch.tensor(number), y.float()).to(dt)
    assert torch.equal(got, want)


def test_a_large_multiplier_of_an_fp16_module_is_finite_where_eager_is(tmp_path):
    """`y * 1e5` then `/ 1e5` in an fp16 module: eager's values, where the oracle's were inf and NaN."""
    r = ref(tmp_path, ["x = (y * 1e5) / 1e5"])
    graph = trace(r)
    torch.manual_seed(0)
    model = r.Model(*r.init_args()).half()
    x = (torch.randn(8, 16) * 0.05).half()
    with torch.no_grad():
        eager, got = model(x), graph.interpret(x, copy.deepcopy(model))
    assert eager.isfinite().all()   # (|y| < 0.65: y * 1e5 is an fp16 number)
    torch.testing.assert_close(got, eager, rtol=1e-2, atol=1e-2)


# torch computes these reductions in float32 inside (its math type) on a 16-bit input and rounds
# once at the end; kgen writes them with several ops, each of which a 16-bit build rounded.
INTERNAL_FP32 = {
    "var": "x = y + y.var(-1, keepdim=True)",
    "std": "x = y / (y.std(-1, keepdim=True) + 1e-5)",
    "var_mean": "v, m = torch.var_mean(y, -1, keepdim=True)\nx = (y - m) / torch.sqrt(v + 1e-5)",
    "norm": "x = y / y.norm(dim=-1, keepdim=True)",
    "vector_norm": "x = y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)",
    "normalize": "x = F.normalize(y, dim=-1)",
    "rms_norm": "x = F.rms_norm(y, (24,), eps=1e-6)",
}


@pytest.mark.parametrize("name", sorted(INTERNAL_FP32))
def test_a_reduction_torch_computes_in_float32_is_rounded_once(name, tmp_path):
    """In an fp16 module at activations of a few hundred: before, (y - mean)^2 and y^2 overflowed
    fp16 (a variance of inf, y / y.norm() of 0, rms_norm's 0), where eager's are finite; in bf16
    the extra roundings were several steps off. Now the steps are fp32 (a to_opmath node, the
    result cast back once); in float64 the oracle is float64 throughout (torch's own var)."""
    r = ref(tmp_path, INTERNAL_FP32[name].splitlines())
    graph = trace(r)
    (up,) = [n for n in graph.live() if n.op == "to_opmath"]
    assert not graph.node(up.args[0]).fp32 and any(n.op == "to_module_dtype" for n in graph.live())
    torch.manual_seed(0)
    model = r.Model(*r.init_args())
    torch.manual_seed(1)
    x = torch.randn(8, 16) * 300
    with torch.no_grad():
        exact = model.double()(x.double())
        torch.testing.assert_close(graph.interpret(x.double(), copy.deepcopy(model)), exact, rtol=1e-12, atol=1e-12)
        model.half()
        eager, got = model(x.half()), graph.interpret(x.half(), copy.deepcopy(model))
    assert eager.isfinite().all() and got.dtype == torch.float16
    error = lambda t: (t.double() - exact).abs().max().item()   # noqa: E731
    assert error(got) <= 2 * error(eager) + 1e-3 * exact.abs().max().item(), (error(got), error(eager))

