"""GPU tier of gated units (tests/test_glu.py has the CPU side): the emitted file of GLU / SwiGLU /
GEGLU modules against the module itself, kgen's full gate (forward, BatchNorm's buffers, gradients in
train and eval mode, a training run) in fp32 (1e-4) and bf16 (1e-2), at ragged sizes (257 rows, 296
features in, 592 out: halves of 296); and a (batch, tokens, features) SwiGLU MLP on its own input."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_rows_input_gpu import assert_near_fp64_on
from test_spellings_probe60_users import source

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
L = "self.fc = nn.Linear(in_features, out_features)"
BACK = "self.out = nn.Linear(out_features // 2, in_features)"
ROWS, IN, OUT = 257, 296, 592
# name -> (init, body, input shape); a chain's last GEMM gives in_features.
CASES = {
    "swiglu": (L, "a, b = self.fc(x).chunk(2, dim=-1)\nx = F.silu(a) * b", (ROWS, IN)),
    "geglu_slices_softmax": (L, "h = self.fc(x)\nP = h.shape[-1] // 2\nx = torch.softmax(h[:, :P] * F.gelu(h[:, P:]), dim=-1)",
                             (ROWS, IN)),
    "glu_module_rms": (f"{L}\nself.glu = nn.GLU(dim=-1)\nself.g = nn.Parameter(torch.rand(out_features // 2) + 0.5)",
                       "x = self.glu(self.fc(x))\nx = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g",
                       (ROWS, IN)),
    "batchnorm_then_swiglu": (f"{L}\nself.bn = nn.BatchNorm1d(out_features)",
                              "a, b = self.bn(self.fc(x)).chunk(2, -1)\nx = F.silu(a) * b", (ROWS, IN)),
    "swiglu_mlp": (f"{L}\n{BACK}", "a, b = self.fc(x).split(self.fc.out_features // 2, dim=-1)\nx = self.out(F.silu(a) * b)",
                   (ROWS, IN)),
    "swiglu_mlp_tokens": (f"{L}\n{BACK}", "a, b = self.fc(x).chunk(2, dim=-1)\nx = self.out(F.silu(a) * b)", (3, 86, IN)),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("glu_refs")
    modules = {}
    for name, (init, body, shape) in CASES.items():
        path = d / f"{name}.py"
        path.write_text(source(init, body, shape=shape, args=f"{IN}, {OUT}"))
        out = IN if BACK in init else OUT
        modules[name] = (path, int(Reference(str(path)).input.shape[0]), IN, out)
    return tf32x3_wgmma_files(tmp_path_factory, "glu", modules)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


def test_a_swiglu_mlp_on_its_tokens(files):
    """ModelNew on the (batch, tokens, features) input itself: the module's shape, output and dx as
    near fp64 as eager's (test_rows_input_gpu.assert_near_fp64_on)."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["swiglu_mlp_tokens"]
    assert_near_fp64_on(f, f.reference.rows_of)
