"""The forward row function of a module whose row stage is a pooling alone (no row reduction or
GroupNorm before the output pass) on the host, as tests/test_group_norm_host.py runs GroupNorm's:
cached (the row copied into shared memory, which the output pass then reads) and uncached (S read
where it is), against the IR's oracle in fp64. The cached form's copy was made by the first pass
that reads the row; a pooling alone has none, and its output pass read shared memory nothing had
written (a session 33 review)."""

import pytest
import torch

from conftest import module_source
from kgen.frontend.problems import graph
from kgen.lower.forward import lower
from test_backward_host import GXX
from test_group_norm_host import build_row_function, oracle_case, row_main, run_row_function

pytestmark = pytest.mark.skipif(GXX is None, reason="g++ not on PATH")
M, IN, N = 3, 8, 64

# argv[1]: 1 for the cached row function (the row copied into `cache`), 0 the uncached one.
MAIN = row_main("true, float, false", "false, float, false")

POOLS = {
    "max_pool1d(2)": "x = torch.sigmoid(x)\nx = F.max_pool1d(x.unsqueeze(1), 2).squeeze(1)",
    # (a pooling of tanh(z): one of z itself is the GEMM's, rewrite.pool_as_weight)
    "tanh then avg_pool1d(4, 3)": "x = torch.tanh(x)\nx = F.avg_pool1d(x.unsqueeze(1), 4, 3).squeeze(1)",
}


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("name", sorted(POOLS))
def test_a_pooling_alone_reads_the_row_it_copied(name, cached, tmp_path):
    ref = tmp_path / "pool.py"
    ref.write_text(module_source(POOLS[name], {}, N))
    low = lower(graph(str(ref), M, IN, N).parts[0], False, False)
    assert low.eval.stage2_cuda.count("kgen::copy_row(src, cache, N);") == 1
    exe = build_row_function(low.eval.stage2_cuda, MAIN, tmp_path / "pool")

    s, operands, expected = oracle_case(str(ref), low, low.eval.stored, M, IN, N)
    out = run_row_function(exe, cached, s, operands, expected.shape[1])
    assert torch.allclose(out, expected, atol=2e-6, rtol=1e-5), (out - expected).abs().max().item()
