"""Session 7: where the gradients of a wgmma tf32x3 file go wrong at 128 rows (the batch where its
forward splits K). Usage: python3 split_grad_diag.py FILE.py (gemm_mul_leakyrelu, 4096->4096)."""
import sys

import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import check_gradients

torch.backends.cuda.matmul.allow_tf32 = False
f = EmittedFile(sys.argv[1])
dev = torch.device("cuda")
for b in (64, 127, 128, 129, 256, 1000):
    print(b, check_gradients(f, dev, 1e-4, b, True).line()[:260], flush=True)

mod = f.module
torch.manual_seed(0)
M, K, N = 128, 4096, 4096
x = torch.rand(M, K, device=dev)
w = torch.randn(N, K, device=dev) / 64
bias = torch.randn(N, device=dev)
g = torch.randn(M, N, device=dev)
z64 = x.double() @ w.double().t() + bias.double()
slope, mult = 0.1, 2.0
y = z64 * mult
dz64 = g.double() * mult * torch.where(y > 0, 1.0, slope).double()
for keep in (1, 0):
    out, kept = mod._part0(x, w, 1, bias, keep)
    print(f"keep_z={keep}: out err {((out.double() - torch.where(y > 0, y, slope * y)).abs().max()):.3e}", end=" ")
    if keep:
        print(f"kept z err {(kept.view(M, N).double() - z64).abs().max():.3e}", end=" ")
    print()
    for z in ((kept,) if keep else ()) + (kept.new_empty(0),):
        dx, dw, cols, _, _ = mod._launch_backward(0, g, x, w, z, 1, 1, 0, 1, operand0=bias)
        torch.cuda.synchronize()
        print(f"  backward z={'kept' if z.numel() else 'recomputed'}: dx {(dx.double() - dz64 @ w.double()).abs().max():.3e} "
              f"dw {(dw.double() - dz64.t() @ x.double()).abs().max():.3e} db {(cols[0].double() - dz64.sum(0)).abs().max():.3e} "
              f"(|dw| {(dz64.t() @ x.double()).abs().max():.2e})")
