"""LayerNorm and F.normalize over the features: LayerNorm is GroupNorm with one group (the same
statistics, eps and per-feature affine, so the same kernels and backward); F.normalize is the
row's 2-norm, clamped below by eps, dividing the row. Each checked against the module itself
(fp64 oracle, train and eval), its gradients against torch.autograd, and lowered."""

import pytest

from kgen.lower import forward as lower
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace

from conftest import module_source
from test_autodiff import check_module_gradients
from test_ir import SMALL, check_oracle

N = 1024   # SMALL's out_features
CASES = {
    "layernorm_module": ("x = self.ln(x)\nx = torch.tanh(x)", {"ln": "nn.LayerNorm(out_features)"}),
    "layernorm_no_affine": ("x = self.ln(x)", {"ln": "nn.LayerNorm(out_features, elementwise_affine=False)"}),
    "layernorm_no_bias": ("x = self.ln(x) * 2.0", {"ln": "nn.LayerNorm(out_features, bias=False)"}),
    "layernorm_functional": ("x = F.layer_norm(x, (%d,), self.w, self.b, 1e-3)" % N,
                             {"w": "nn.Parameter(torch.randn(out_features))", "b": "nn.Parameter(torch.randn(out_features))"}),
    "normalize": ("x = F.normalize(x, dim=1)\nx = x * 3.0", {}),
    "normalize_p2_last": ("x = F.normalize(torch.relu(x), p=2, dim=-1, eps=1e-6)", {}),
}


def _ref(tmp_path, name) -> Reference:
    body, params = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(module_source(body, params, out_features=N))
    return Reference(path, SMALL)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("training", [True, False])
def test_norm_matches_the_module_and_its_gradients(name, training, tmp_path):
    ref = _ref(tmp_path, name)
    check_oracle(ref, training)
    check_module_gradients(ref, training)
    lower.lower(trace(ref), fused_stats=True, external_gemm=False)


def test_layernorm_is_groupnorm_with_one_group(tmp_path):
    ln = trace(_ref(tmp_path, "layernorm_module"))
    path = tmp_path / "gn.py"
    path.write_text(module_source("x = self.gn(x)\nx = torch.tanh(x)", {"gn": "nn.GroupNorm(1, out_features)"},
                                  out_features=N))
    gn = trace(Reference(path, SMALL))
    # The same node, marked a LayerNorm: its 16-bit statistics stay fp32, as torch's LayerNorm keeps them.
    assert ln.describe() == gn.describe().replace("gn.", "ln.").replace("bias=True)", "bias=True, layer=True)")


def test_layernorm_over_other_shapes_is_refused(tmp_path):
    from kgen.ir.graph import Unsupported

    path = tmp_path / "bad.py"
    path.write_text(module_source("x = F.layer_norm(x, (2, 512))", {}, out_features=N))
    with pytest.raises(Unsupported, match="LayerNorm over"):
        trace(Reference(path, SMALL))


def test_layernorm_over_one_feature_is_refused_as_layernorm(tmp_path):
    """Linear(in, 1) then LayerNorm(1): refused for what it is (its output is its bias), not as
    a GroupNorm whose (1,) weight is no per-feature parameter (session 18's probe)."""
    from kgen.ir.graph import Unsupported

    path = tmp_path / "one.py"
    path.write_text(module_source("x = self.ln(x)", {"ln": "nn.LayerNorm(out_features)"}, out_features=1))
    with pytest.raises(Unsupported, match="LayerNorm over one feature"):
        trace(Reference(path, SMALL))
