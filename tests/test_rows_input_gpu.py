"""GPU tier of modules whose input is (..., features), a Linear over its last dimension, or whose
trailing dimensions the module flattens into the Linear's features, which the emitted file runs
on the input's rows (tests/test_rows_input.py has the CPU side): kgen's full gate
in fp32 (1e-4) and bf16 (1e-2) on the rows, and ModelNew on the (..., features) input itself,
forward and backward, against the module: KernelBench's allclose, errors against fp64 beside
eager's, and the input's gradient in the input's shape."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_rows_input import ACCEPTED, FLATTENS, IN, OUT, write, write_flattened

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
# (and inputs flattened into the features before the GEMM: (batch, 4, 6), (batch, 2, 2, 6))
CASES = ["gelu", "layernorm", "row_max", "four_d", "view_size0", "nn_flatten", "four_d_whole"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows_refs")
    paths = {name: write(d, name, *ACCEPTED[name]) if name in ACCEPTED else write_flattened(d, name, *FLATTENS[name])
             for name in CASES}
    return tf32x3_wgmma_files(tmp_path_factory, "rows_input",
                              {name: (path, int(Reference(str(path)).input.shape[0]), IN, OUT)
                               for name, path in paths.items()})


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate_on_the_rows(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


# (batch, features) references whose modules compute on (..., features) as on their rows
# (trace.takes_rows): their files take such an input as eager's module does.
BATCH_CASES = ["gelu", "layernorm", "row_max"]


@pytest.fixture(scope="module")
def batch_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows_of_batch_refs")
    return tf32x3_wgmma_files(tmp_path_factory, "rows_of_batch",
                              {name: (write(d, name, *ACCEPTED[name][:2], "batch_size"), 3, IN, OUT)
                               for name in BATCH_CASES})


@pytest.mark.parametrize("name", BATCH_CASES)
@pytest.mark.parametrize("shape", [(2, 5, IN), (IN,)], ids=["rows", "one_sample"])
def test_a_batch_features_file_on_a_rows_input(batch_files, name, shape):
    """ModelNew of a (batch, features) reference on a (2, 5, features) input, and on one sample,
    (features,): as test_the_module_on_its_own_input checks its own input."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    assert_near_fp64_on(batch_files[name], shape)


@pytest.mark.parametrize("name", CASES)
def test_the_module_on_its_own_input(files, name):
    """ModelNew(x) for x of the reference's own (..., features) shape: the module's output shape,
    KernelBench's allclose at 1e-4, an error against fp64 within the gate's factor of eager's,
    and x's gradient of x's shape, as near fp64 as eager's (times the same factor)."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    assert_near_fp64_on(files[name], files[name].reference.rows_of)


def assert_near_fp64_on(f, shape):
    """ModelNew, eager and an fp64 copy (one state, eval mode) on an input of `shape`: the
    module's output shape, KernelBench's allclose at 1e-4, output and x's gradient (of x's shape)
    as near fp64 as eager's, times the gate's factor (eager's error floored at an fp32 ulp of the
    largest value, as the gate floors it: a max's dx is a copy of W's rows, eager exact, and
    3xTF32 carries w in 22 of its 24 bits)."""
    from kgen.check.validate import FP32_EXACT_FACTOR, ULP_FP32

    torch.manual_seed(0)
    with torch.device("cuda"):
        ref, new = f.Model(*f.init_args()), f.ModelNew(*f.init_args())
        ref64 = f.Model(*f.init_args()).double()
    new.load_state_dict(ref.state_dict())
    ref64.load_state_dict(ref.state_dict())
    for m in (ref, new, ref64):
        m.eval()
    x = torch.randn(*shape, device="cuda")
    outs, grads = [], []
    for m, v in ((ref, x), (new, x), (ref64, x.double())):
        v = v.clone().requires_grad_(True)
        out = m(v)
        out.backward(torch.ones_like(out))
        outs.append(out.detach().double())
        grads.append(v.grad.double())
    assert outs[1].shape == outs[0].shape and grads[1].shape == x.shape
    assert torch.allclose(outs[0], outs[1], atol=1e-4, rtol=1e-4)
    for (eager, kgen, exact), what in ((outs, "output"), (grads, "dx")):
        err, eager_err = (kgen - exact).abs().max().item(), (eager - exact).abs().max().item()
        floor = ULP_FP32 * exact.abs().max().item()
        assert err <= FP32_EXACT_FACTOR * max(eager_err, floor), f"{what}: {err:.2e} against eager's {eager_err:.2e}"
