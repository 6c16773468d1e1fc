"""GPU tier of a view of the module's output as its last op (Graph.output_tail with arguments:
x.view(-1), flatten(), unsqueeze(1), a 3-d reshape, squeeze() of a (batch,) value; the CPU side
is tests/test_output_tail.py): kgen's full gate in fp32 (1e-4) and bf16 (1e-2) on each file, which
runs the module at several batches, in training and eval, forward and backward, and KernelBench's
eval."""

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import KERNELBENCH_CHECK, validate
from kgen.codegen import generator
from kgen.tune.search import Candidate
from kgen.tune.spec import Spec, Tile

from conftest import build_once
from test_output_tail import HEAD, VIEWS

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
CASES = ["view_flat", "flatten_all", "view_3d", "unsqueeze_1", "unsqueeze_last", "row_sums_squeeze"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not HOPPER:
        return {}
    d = tmp_path_factory.mktemp("views")
    candidates = []
    for name in CASES:
        path = d / f"view_{name}.py"
        path.write_text(HEAD.format(body=VIEWS[name][0]))
        spec = Spec.of(str(path), 8, 16, 24, math="tf32x3", backend="wgmma", fusion=1,
                       tile=Tile(128, 128, 32, 16, 128, stages=4))
        candidates.append(Candidate(spec, generator.write(spec, d / f"{spec.name()}.py")))
    build_once(tmp_path_factory, "output_views", candidates, 8, 900, lambda line: None)
    return {name: EmittedFile(c.path) for name, c in zip(CASES, candidates)}


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate_on_a_view_of_the_output(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    results = validate(files[name], tol=tol, dtype=dtype)
    failed = [r for r in results if not r.passed
              and not (dtype != torch.float32 and r.name == KERNELBENCH_CHECK and r.max_abs <= r.ref_abs)]
    assert not failed, [r.line() for r in failed]


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
