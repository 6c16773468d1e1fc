"""GPU tier of session 61's spellings (tests/test_spellings_probe61_views.py has the CPU side): the
emitted files of a module of each kind now taken, kgen's full gate in fp32 (1e-4) and bf16 (1e-2)
(eval mode alone where the module draws at random in training, RReLU, AlphaDropout: the file
raises there), and for a forward that reads its 3-d input's sizes, ModelNew on that input against
the module."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_spellings_probe60_users import source

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
L = "self.fc = nn.Linear(in_features, out_features)"
BN = "self.bn = nn.BatchNorm1d(out_features)"
R3 = (4, 6, 64)
CASES = {
    "avg_pool1d_2d": (L, "x = F.avg_pool1d(torch.relu(self.fc(x)), 4)", (32, 64)),
    "instance_norm": (L + "\nself.norm = nn.InstanceNorm1d(1)", "x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)", (32, 64)),
    "rrelu_eval": (L + "\nself.act = nn.RReLU(0.1, 0.3)", "x = self.act(self.fc(x))", (32, 64)),
    "alpha_dropout": (L + "\nself.drop = nn.AlphaDropout(0.2)", "x = self.drop(F.selu(self.fc(x)))", (32, 64)),
    "lead_view": (L, "B, S, D = x.shape\nx = F.gelu(self.fc(x.view(B * S, D))).view(B, S, -1)", R3),
    "lead_bn_transpose": (L + "\n" + BN, "x = self.bn(self.fc(x).transpose(1, 2)).transpose(1, 2)", R3),
    "lead_einsum": ("self.w = nn.Parameter(torch.randn(out_features, in_features) / 8)",
                    "x = torch.softmax(torch.einsum('bsi,oi->bso', x, self.w), dim=2)", R3),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("probe61_refs")
    modules = {}
    for name, (init, body, shape) in CASES.items():
        path = d / f"{name}.py"
        path.write_text(source(init, body, shape, args="64, 96"))
        modules[name] = (path, int(Reference(str(path)).input.shape[0]), 64, 96)
    return tf32x3_wgmma_files(tmp_path_factory, "probe61", modules)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_gate(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


@pytest.mark.parametrize("name", ["lead_view", "lead_bn_transpose", "lead_einsum"])
def test_a_forward_reading_its_sizes_on_its_own_input(files, name):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files[name]
    torch.manual_seed(0)
    eager = f.Model(*f.init_args()).cuda().double()
    torch.manual_seed(0)
    new = f.ModelNew(*f.init_args()).cuda()
    new.load_state_dict({k: v.float() for k, v in eager.state_dict().items()})
    x = torch.randn(3, 7, 64, device="cuda")
    for training in (True, False):
        eager.train(training)
        new.train(training)
        want = eager(x.double())
        got = new(x)
        assert got.shape == want.shape
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
