"""A 0-d integer parameter or buffer in the epilogue (CPU): the constant as people keep it
when the value they pass is an int, `self.register_buffer("divisor", torch.tensor(divisor))` with
divisor = 2, then `y / self.divisor`. torch promotes it as a number: the result has y's dtype and
the integer's value in it is the integer in y's dtype. kgen reads it so (Tracer.param's
attrs["integer"]: the emitted forward hands the kernels `self.divisor.to(x.dtype)`, and the IR's
oracle converts it alike). An integer tensor of more elements is refused (torch.sqrt of an int64
vector is float32, which would promote a 16-bit y), and so is a read of a BatchNorm's
num_batches_tracked (its BatchNorm counts it in place in training mode, as the running buffers).

Spellings are generated: how the integer is kept (a 0-d int64 buffer, int32, a buffer made
from an int constant) x how forward uses it (divide, multiply, add, a power, a comparison, inside
a clamp's arithmetic, .item()); each traced and checked against the module (fp64, training and
eval), its gradients against torch.autograd, in bf16 against the module in bf16, and generated."""

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from conftest import module_source
from test_ir import check_half_oracle
from test_spellings_ops import check

KEPT = {
    "zero_d": "self.register_buffer('k', torch.tensor(3))",
    "int32": "self.register_buffer('k', torch.tensor(3, dtype=torch.int32))",
    "from_int_constant": "self.register_buffer('k', torch.tensor(int(out_features) // out_features * 3))",
}
USES = {
    "divide": "x = x / self.k",
    "multiply": "x = torch.relu(x * self.k)",
    "add_then_scale": "x = (x + self.k) * 0.5",
    "power": "x = torch.sigmoid(x) ** self.k",
    "compare": "x = torch.where(x > self.k / 10, x, x * self.k)",
    "item": "x = x * self.k.item()",
}


def _ref(tmp_path, kept: str, use: str, name="ref") -> Reference:
    path = tmp_path / f"{name}.py"
    text = module_source(use, {}, 24).replace("        self.gemm = nn.Linear(in_features, out_features)",
                                               "        self.gemm = nn.Linear(in_features, out_features)\n        " + kept)
    assert kept in text
    path.write_text(text)
    return Reference(path)


@pytest.mark.parametrize("use", USES)
@pytest.mark.parametrize("kept", KEPT)
def test_a_0d_integer_is_read_in_the_modules_dtype(kept, use, tmp_path):
    ref = _ref(tmp_path, KEPT[kept], USES[use])
    graph = check(ref)
    params = [n for n in graph.nodes if n.kind == "param" and n.attrs["path"] == "k"]
    assert params and all(n.attrs.get("integer") for n in params) or use == "item"
    check_half_oracle(ref, torch.bfloat16)


def test_the_emitted_forward_hands_the_kernels_the_integer_in_the_modules_dtype(tmp_path):
    ref = _ref(tmp_path, KEPT["zero_d"], USES["divide"])
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "_kgen_checked_param(self.k.to(x.dtype), x, (1,), 'k', autocast)" in out.read_text()


@pytest.mark.parametrize("kept, why", [
    ("self.register_buffer('k', torch.arange(out_features))", "0-d integer ones"),
    ("self.register_buffer('k', torch.tensor([3]))", "0-d integer ones"),
])
def test_an_integer_tensor_of_a_dimension_is_refused(kept, why, tmp_path):
    with pytest.raises(Unsupported, match=why):
        trace(_ref(tmp_path, kept, "x = x + self.k"))


def test_a_batchnorms_count_read_as_a_value_is_refused(tmp_path):
    path = tmp_path / "count.py"
    path.write_text(module_source("x = self.bn(x) / (self.bn.num_batches_tracked + 1)",
                                  {"bn": "nn.BatchNorm1d(out_features)"}, 24))
    with pytest.raises(Unsupported, match="reads bn.num_batches_tracked as a value"):
        trace(Reference(path))
