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
