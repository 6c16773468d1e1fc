"""GPU tier of a view of the module's output as its last op (Graph.output_tail with arguments:
x.view(-1), flatten(), unsqueeze(1), a 3-d reshape, squeeze() of a (batch,) value; the CPU side
is tests/test_output_tail.py): kgen's full gate in fp32 (1e-4) and bf16 (1e-2) on each file, which
runs the module at several batches, in training and eval, forward and backward, and KernelBench's
eval."""

import pytest
import torch

from kgen.check.validate import validate

from conftest import gate_failures, tf32x3_wgmma_files
from test_output_tail import HEAD, VIEWS

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
CASES = ["view_flat", "flatten_all", "view_3d", "unsqueeze_1", "unsqueeze_last", "row_sums_squeeze"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("views")
    for name in CASES:
        (d / f"view_{name}.py").write_text(HEAD.format(body=VIEWS[name][0]))
    return tf32x3_wgmma_files(tmp_path_factory, "output_views",
                              {name: (d / f"view_{name}.py", 8, 16, 24) for name in CASES})


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate_on_a_view_of_the_output(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


@pytest.mark.parametrize("name", CASES)
def test_the_output_has_the_references_shape_at_a_batch_of_one(files, name):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files[name]
    torch.manual_seed(0)
    new, ref = f.ModelNew(*f.init_args()).cuda(), f.Model(*f.init_args()).cuda()
    new.load_state_dict(ref.state_dict())
    for batch in (1, 5):
        x = torch.randn(batch, 16, device="cuda")
        out, expect = new(x), ref(x)
        assert out.shape == expect.shape
        torch.testing.assert_close(out, expect, rtol=1e-4, atol=1e-4)
