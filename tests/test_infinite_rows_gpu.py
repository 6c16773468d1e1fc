"""GPU: logsumexp of rows holding an infinity, through the emitted file's kernels (forward and
backward): a row of -inf (log of a ReLU'd row that is all <= 0) gives -inf and a row holding
+inf (an exp that overflowed) +inf, as torch's logsumexp gives them, and the gradients equal
torch's where torch's are finite (the IR's side: tests/test_ties_probe54.py)."""
from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.tune.search import Candidate, build_all
from kgen.tune.spec import Spec, Tile
from conftest import module_source
from test_render import exec_file

pytestmark = pytest.mark.gpu
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
SHAPE = (64, 96, 160)   # batch, in, out
BODIES = {"minus_inf": "x = torch.logsumexp(torch.log(torch.relu(x)), dim=1, keepdim=True)",
          "plus_inf": "x = torch.logsumexp(torch.exp(x * 1000.0), dim=1, keepdim=True)"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not HOPPER:
        pytest.skip("the wgmma GEMM needs a Hopper (sm_90) GPU")
    d = tmp_path_factory.mktemp("infinite_rows")
    candidates = []
    for name, body in BODIES.items():
        ref = d / f"{name}.py"
        ref.write_text(module_source(body, {}, SHAPE[2]))
        spec = Spec.of(str(ref), *SHAPE, math="tf32x3", backend="wgmma", fusion=1,
                       tile=Tile(128, 128, 32, 16, 128, stages=4))
        candidates.append(Candidate(spec, generator.write(spec, d / f"{name}_file.py")))
    build_all(candidates, 16, 600, lambda line: None)
    return {name: (str(d / f"{name}.py"), c.path) for name, c in zip(BODIES, candidates)}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_rows_holding_an_infinity_are_torchs(files, name):
    from kgen.frontend.problems import load

    ref_path, file_path = files[name]
    module = exec_file(Path(file_path).read_text(), f"inf_{name}")
    ref = load(ref_path, *SHAPE)
    torch.manual_seed(0)
    new = module.ModelNew(*ref.init_args()).cuda()
    eager = ref.Model(*ref.init_args()).cuda()
    eager.load_state_dict(new.state_dict())
    x = torch.rand(SHAPE[0], SHAPE[1], device="cuda") * 2 - 1
    # Rows 0-7 of x are 0, so z there is the bias: -1 everywhere for the -inf module (a row of
    # -inf after log(relu)), 3 in two columns for the +inf one (exp(3000) overflows).
    x[:8] = 0.0
    with torch.no_grad():
        for m in (new, eager):
            m.gemm.bias.fill_(-1.0 if name == "minus_inf" else 0.0)
            if name == "plus_inf":
                m.gemm.bias[:2] = 3.0
    xs = [x.clone().requires_grad_() for _ in range(2)]
    ours, theirs = new(xs[0]), eager(xs[1])
    assert torch.isinf(theirs).any()
    torch.testing.assert_close(ours, theirs, equal_nan=True, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(theirs)
    grads = torch.autograd.grad(ours, [xs[0], *new.parameters()], g)
    expect = torch.autograd.grad(theirs, [xs[1], *eager.parameters()], g)
    for a, e in zip(grads, expect):
        torch.testing.assert_close(a, e, equal_nan=True, rtol=1e-3, atol=1e-4)
