"""GPU tier of the Linear's one rounding in a 16-bit build (lower.forward.linear_steps; the CPU side is
tests/test_norm_stats_16bit.py and test_spellings_ops' GEMM spellings): a bias computed from
parameters (F.linear(x, W, self.b * 2)), torch.addmm's alpha and beta, and the input scaled by a
number before the GEMM (self.fc(x / self.t)), each followed by tanh, whose mid-range shows a z
rounded twice. Session 57 found the first at 2-4x eager's error against fp64 in bf16, and
KernelBench's eval failing it in 1 of 5 trials. kgen's full gate in fp32 (1e-4) and bf16 (1e-2),
at K = 300 (off TMA's 16-byte rows in bf16: the C entry's pad), and in bf16 every forward check's
error at most 1.25x eager's: one rounding where torch's GEMM rounds once."""

import pytest
import torch

from kgen.check.validate import KERNELBENCH_CHECK, validate

from conftest import tf32x3_wgmma_files

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)

MODULE = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.b = nn.Parameter(torch.randn(out_features))
        self.t = nn.Parameter(torch.tensor(1.3))

    def forward(self, x):
        {body}
        return torch.tanh(y)


def get_inputs():
    return [torch.randn(64, 300)]


def get_init_inputs():
    return [300, 96]
"""
CASES = {
    "computed_bias": "y = F.linear(x, self.fc.weight, self.b * 2)",
    "addmm_alpha_beta": "y = torch.addmm(self.b, x, self.fc.weight.t(), beta=2.0, alpha=3.0)",
    "scaled_input": "y = self.fc(x / self.t) * 3.0",
    # (a bias added by an op of its own: eager rounds z, then the sum; session 59)
    "separate_bias": "y = F.linear(x, self.fc.weight) + self.b",
}
# the checks that compare the forward's output with eager's beside it (not gradients, not the
# magnitudes' or offsets' own yardsticks)
FORWARD_CHECKS = ("eval mode", "train, batch 7", KERNELBENCH_CHECK)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("linear_rounding_refs")
    for name, body in CASES.items():
        (d / f"{name}.py").write_text(MODULE.replace("{body}", body))
    return tf32x3_wgmma_files(tmp_path_factory, "linear_rounding",
                              {name: (d / f"{name}.py", 64, 300, 96) for name in CASES})


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_gate_and_eagers_error(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    results = validate(files[name], tol=tol, dtype=dtype)
    failed = [r.line() for r in results if not r.passed]
    assert not failed, failed
    if dtype == torch.bfloat16:
        compared = [r for r in results if r.name.startswith(FORWARD_CHECKS) and r.ref_abs > 0]
        assert compared, [r.name for r in results]
        assert all(r.max_abs <= 1.25 * r.ref_abs for r in compared), [r.line() for r in compared]
