"""Which rows and columns of the broadcast tail's gradients are wrong (gemm_groupnorm_min_bias,
tests/test_tail_backward.py's GPU case) at several batches and both GEMM backends."""
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, "tests")
import test_tail_backward as t  # noqa: E402

for backend, tile in t._gpu_backends():
    for batch in (255, 256, 257, 258, 384, 2051):
        d = Path(tempfile.mkdtemp())
        new, eager, exact, k = t._gpu_pair("gemm_groupnorm_min_bias", d, backend, tile, batch)
        x = torch.rand(batch, k, device="cuda") * 2 - 1
        g = torch.randn(new(x).shape, device="cuda")
        ours, e32, e64 = t._gradients(new, x, g), t._gradients(eager, x, g), t._gradients(exact, x.double(), g)
        names = ["x"] + [n for n, _ in new.named_parameters()]
        line = []
        for n, a, b, c in zip(names, ours, e32, e64):
            err = (a.double() - c).abs()
            line.append(f"{n} {err.max().item():.1e}/{(b.double() - c).abs().max().item():.1e}")
            if n == "x" and err.max().item() > 1e-3:
                rows = err.amax(dim=1)
                bad = (rows > 1e-3).nonzero().flatten().tolist()
                line.append(f"bad x rows {bad[:8]} ({len(bad)})")
        print(backend, batch, "; ".join(line), flush=True)
