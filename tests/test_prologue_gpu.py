"""GPU tier of prologues, ops on the module's input before its first GEMM
(tests/test_spellings_probe62_prologue.py has the CPU side): the emitted file of pre-norm blocks
(LayerNorm or RMSNorm, then an MLP, the raw input's residual after), a norm or an activation before
one Linear, and a classifier head's Dropout, against the module itself with kgen's full gate
(forward, gradients in train and eval mode, Dropout's mask reproduced in training, a training run)
in fp32 (1e-4) and bf16 (1e-2), at ragged sizes (257 rows, 296 features in, 592 hidden); a pre-norm
block on its (batch, tokens, features) input; and torch.autocast refused by name."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_rows_input_gpu import assert_near_fp64_on
from test_spellings_probe60_users import source

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
ROWS, IN, OUT = 257, 296, 592
L = "self.fc = nn.Linear(in_features, out_features)"
MLP = "self.fc1 = nn.Linear(in_features, out_features)\nself.fc2 = nn.Linear(out_features, in_features)"
W = "self.w = nn.Parameter(torch.rand(in_features) + 0.5)"
# name -> (init, body, input shape, whether the module's output has in_features: an MLP's)
CASES = {
    "layernorm_mlp_residual": (f"self.ln = nn.LayerNorm(in_features)\n{MLP}",
                               "x = x + self.fc2(F.gelu(self.fc1(self.ln(x))))", (ROWS, IN), True),
    "layernorm_mlp_residual_tokens": (f"self.ln = nn.LayerNorm(in_features)\n{MLP}",
                                      "x = x + self.fc2(F.gelu(self.fc1(self.ln(x))))", (3, 86, IN), True),
    "llama_rmsnorm_linear": (f"{W}\n{L}", "x = self.fc(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w)",
                             (ROWS, IN), False),
    "rmsnorm_module_mlp_residual": (f"self.norm = nn.RMSNorm(in_features, eps=1e-6, elementwise_affine=False)\n{MLP}",
                                    "x = x + self.fc2(F.silu(self.fc1(self.norm(x))))", (ROWS, IN), True),
    "layer_norm_no_affine_relu_linear": (L, "x = self.fc(torch.relu(F.layer_norm(x, x.shape[-1:])))", (ROWS, IN), False),
    "gelu_linear": (L, "x = self.fc(F.gelu(x))", (ROWS, IN), False),
    "dropout_head": (f"self.drop = nn.Dropout(0.1)\n{L}", "x = torch.tanh(self.fc(self.drop(x)))", (ROWS, IN), False),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("prologue_refs")
    modules = {}
    for name, (init, body, shape, square) in CASES.items():
        path = d / f"{name}.py"
        path.write_text(source(init, body, shape=shape, args=f"{IN}, {OUT}"))
        modules[name] = (path, int(Reference(str(path)).input.shape[0]), IN, IN if square else OUT)
    return tf32x3_wgmma_files(tmp_path_factory, "prologue", modules)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


def test_a_pre_norm_block_on_its_tokens(files):
    """ModelNew on the (batch, tokens, features) input itself: the module's shape, output and dx
    (through the prologue's backward, plus the residual's) as near fp64 as eager's."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["layernorm_mlp_residual_tokens"]
    assert_near_fp64_on(f, f.reference.rows_of)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_autocast_is_refused_by_name(files, dtype):
    """Inside torch.autocast eager runs the LayerNorm in fp32 (on an fp32 module's fp32 input):
    the file raises, naming the prologue's line, rather than compute otherwise."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["layernorm_mlp_residual"]
    with torch.device("cuda"):
        new = f.ModelNew(*f.init_args()).to(dtype)
        x = torch.randn(8, IN, dtype=dtype)
    with torch.autocast("cuda", dtype=torch.bfloat16), pytest.raises(RuntimeError, match=r"before the first GEMM \(line \d+"):
        new(x)
