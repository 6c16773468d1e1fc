"""KernelBench's 36 level-2 GEMM files as published, inside torch.autocast, with kernels: each
file kgen generates for one (its default variant, the one `kgen generate` writes), the module in
fp32 as the file leaves it, in training mode (a BatchNorm on batch statistics, updating its fp32
running buffers), a forward and a backward inside bf16 autocast as a user's mixed-precision
training step runs them. ModelNew's output (its dtype eager's), every gradient and every running
buffer are judged against an fp64 copy of the module, with eager autocast's error as the
yardstick (tests/test_half_gpu.py holds kgen's own reference modules to the same). Modules kgen
did not write: the acceptance corpus (../shared/kernelbench; skipped where it is absent)."""

import warnings

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import has_backward
from kgen.tune.search import Candidate, build_all

from test_half_gpu import assert_within_eager_autocast_error, values_after_step
from test_kernelbench_corpus import KERNELBENCH, generate

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
REFS = sorted((KERNELBENCH / "level2").glob("*.py")) if (KERNELBENCH / "level2").is_dir() else []


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Each published file's emitted file, with its build for bf16 autocast made in parallel."""
    if not HOPPER or not REFS:
        return {}
    d = tmp_path_factory.mktemp("kb_autocast")
    candidates = []
    for ref in REFS:
        out = d / ref.name
        generate(ref, out)
        candidates.append(Candidate(EmittedFile(out).spec, out))
    build_all(candidates, 16, 600, lambda line: None, dtype="bf16", autocast=True)
    return {ref.name: c.path for ref, c in zip(REFS, candidates)}


@pytest.mark.parametrize("ref", REFS, ids=lambda p: p.name.split("_")[0])
def test_a_published_module_trains_under_autocast_as_eager_does(files, ref):
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    if not files:
        pytest.skip("KernelBench's files are not here")
    f = EmittedFile(files[ref.name])
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = f.Model(*f.init_args())
        new = f.ModelNew(*f.init_args())
        exact = f.Model(*f.init_args()).double()
    new.load_state_dict(eager.state_dict())
    exact.load_state_dict(eager.state_dict())
    # (a Dropout in training mode draws its mask in its input's dtype: fp64's would be another)
    training = not f.dropouts
    for m in (eager, new, exact):
        m.train(training)
    computes_16_bit = torch.bfloat16 in f.module._KGEN_OPERAND_BUILDS
    backward = has_backward(f)
    torch.manual_seed(1)
    x = f.reference.inputs()[0].cuda()
    g = None
    results = []
    for model, autocast in ((eager, True), (new, True), (exact, False)):
        xi = (x.double() if not autocast else x.clone()).requires_grad_(backward)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast), warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            out = model(xi)
        if model is new:
            # nothing said, but by a file that computes in fp32 only (it says why)
            assert len([w for w in said if "torch.autocast" in str(w.message)]) == (not computes_16_bit), \
                [str(w.message) for w in said]
        if backward:
            if g is None:
                g = torch.randn(out.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5))
            out.backward(g.to(out.dtype))
        results.append(values_after_step(model, out, xi, backward))
    # (the output in its own dtype's step: an fp32 output whose error is eager's bf16 rounding
    # passed through a reduction, 51's, is held to eager's, where a bf16 step hid a residual
    # added after rounding the input to bf16)
    assert_within_eager_autocast_error(*results, torch.bfloat16, output_step=results[1][0][1].dtype)
