"""GPU tier of Linears side by side on one input (tests/test_spellings_probe62_side.py has the CPU
side): the emitted files of the Llama MLP, Gemma's GeGLU MLP, a GLU of two Linears and functional
spellings, and the pre-norm Llama block (RMSNorm, or LayerNorm with GeGLU, before them: a prologue
part first, the raw input's residual after), each one GEMM of the Linears' weights concatenated whose output's halves are theirs,
against the module itself: kgen's full gate (forward, gradients to the input and to each weight and
bias, train and eval mode, a training run) in fp32 (1e-4) and bf16 (1e-2) at ragged sizes (257
rows, 296 features in, 296 out of each Linear: 592 of the GEMM); the Llama MLP on a (batch,
tokens, features) input; each parameter's gradient against eager's; and the concatenation kept for
inference on trust, which follows an in-place step of the weights."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_rows_input_gpu import assert_near_fp64_on
from test_spellings_probe60_users import source

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
ROWS, IN, H = 257, 296, 296


def _linears(bias: bool, *names: str) -> str:
    return "\n".join(f"self.{n} = nn.Linear(in_features, out_features, bias={bias})" for n in names)


DOWN = "self.down_proj = nn.Linear(out_features, in_features, bias={})"
# The pre-norm Llama block: RMSNorm of x, a prologue, then the MLP of its output side by side, and the
# raw input's residual (tests/test_spellings_probe62_prenorm_side.py has the CPU side).
RMS = "self.post_attention_layernorm = nn.RMSNorm(in_features, eps=1e-6)"
BLOCK = ("h = self.post_attention_layernorm(x)\n"
         "x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))")
# name -> (init, body, input shape, whether a down projection follows)
CASES = {
    "llama_mlp": (f"{_linears(False, 'gate_proj', 'up_proj')}\n{DOWN.format(False)}",
                  "x = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))", (ROWS, IN), True),
    "llama_mlp_tokens": (f"{_linears(False, 'gate_proj', 'up_proj')}\n{DOWN.format(False)}",
                         "x = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))", (3, 86, IN), True),
    "gemma_geglu_up_first_biases": (f"{_linears(True, 'gate_proj', 'up_proj')}\n{DOWN.format(True)}",
                                    "u = self.up_proj(x)\nx = self.down_proj(F.gelu(self.gate_proj(x), approximate='tanh') * u)",
                                    (ROWS, IN), True),
    "glu_of_two_linears": (_linears(True, "fc1", "fc2"), "x = self.fc1(x) * torch.sigmoid(self.fc2(x))", (ROWS, IN), False),
    "llama_block_prenorm": (f"{RMS}\n{_linears(False, 'gate_proj', 'up_proj')}\n{DOWN.format(False)}", BLOCK,
                            (ROWS, IN), True),
    "llama_block_prenorm_tokens": (f"{RMS}\n{_linears(False, 'gate_proj', 'up_proj')}\n{DOWN.format(False)}", BLOCK,
                                   (3, 86, IN), True),
    "layernorm_geglu_biases_block": (
        f"self.norm = nn.LayerNorm(in_features)\n{_linears(True, 'gate_proj', 'up_proj')}\n{DOWN.format(True)}",
        "h = self.norm(x)\nx = x + self.down_proj(F.gelu(self.gate_proj(h), approximate='tanh') * self.up_proj(h))",
        (ROWS, IN), True),
    "functional_silu_written_out": (
        "self.w1 = nn.Parameter(torch.randn(out_features, in_features) / 16)\n"
        "self.w3 = nn.Parameter(torch.randn(in_features, out_features) / 16)\n" + DOWN.format(False),
        "g = F.linear(x, self.w1)\nx = self.down_proj(g * torch.sigmoid(g) * (x @ self.w3))", (ROWS, IN), True),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("side_by_side_refs")
    modules = {}
    for name, (init, body, shape, down) in CASES.items():
        path = d / f"{name}.py"
        path.write_text(source(init, body, shape=shape, args=f"{IN}, {H}"))
        # (the workload's out_features: the last GEMM's, the concatenated 2 H where no down projection follows)
        modules[name] = (path, int(Reference(str(path)).input.shape[0]), IN, IN if down else 2 * H)
    return tf32x3_wgmma_files(tmp_path_factory, "side_by_side", modules)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


@pytest.mark.parametrize("name", ["llama_mlp_tokens", "llama_block_prenorm_tokens"])
def test_a_llama_mlp_on_its_tokens(files, name):
    """ModelNew on the (batch, tokens, features) input itself: the module's shape, output and dx as
    near fp64 as eager's (test_rows_input_gpu.assert_near_fp64_on); the pre-norm block too."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files[name]
    assert_near_fp64_on(f, f.reference.rows_of)


def _pair(f, dtype=torch.float32):
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref, new = f.Model(*f.init_args()).to(dtype), f.ModelNew(*f.init_args()).to(dtype)
    new.load_state_dict(ref.state_dict())
    return ref, new


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["llama_mlp", "gemma_geglu_up_first_biases", "glu_of_two_linears",
                                  "llama_block_prenorm", "layernorm_geglu_biases_block"])
def test_each_parameter_gets_its_gradient(files, name, dtype):
    """Autograd splits the concatenation's gradient back: each weight's and bias's gradient is
    eager's (to the gate's tolerance of the largest), and the state_dicts have the same keys."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    ref, new = _pair(files[name], dtype)
    assert list(new.state_dict()) == list(ref.state_dict())
    x = torch.randn(ROWS, IN, device="cuda", dtype=dtype)
    for m in (ref, new):
        out = m(x)
        out.backward(torch.ones_like(out))
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for (path, p), q in zip(ref.named_parameters(), new.parameters()):
        scale = p.grad.float().abs().max().item()
        err = (q.grad.float() - p.grad.float()).abs().max().item()
        assert err <= tol * max(scale, 1.0), f"{path}: {err:.3e} of {scale:.3e}"


def test_the_kept_concatenation_follows_the_weights(files):
    """With kgen_trust_weight_versions, inference calls reuse the concatenation; an in-place step of
    a weight (torch.optim's kind: a new version) is seen on the next call; switched off, every call
    concatenates."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["gemma_geglu_up_first_biases"]
    ref, new = _pair(f)
    x = torch.randn(ROWS, IN, device="cuda")
    type(new).kgen_trust_weight_versions()
    try:
        with torch.no_grad():
            for _ in range(2):
                torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
            assert new._kgen_weight0() is new._kgen_weight0()   # (kept)
            for m in (ref, new):
                m.gate_proj.weight.mul_(0.5)
                m.up_proj.bias.add_(1.0)
            torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
    finally:
        type(new).kgen_trust_weight_versions(False)
    with torch.no_grad():
        assert new._kgen_weight0() is not new._kgen_weight0()
        torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
