"""Session 54: a training step of Linear(bias=False) -> F.normalize -> x scale with zero rows in
its input (a padded batch), the emitted file's dW against fp64's and eager fp32's: finite, and as
near fp64 as eager's (before norm_sqrt, sqrt's gradient inf times 0 made every dW NaN).

    PYTHONPATH=. python3 docs/experiments/s54/zero_rows.py FILE.py
"""
import sys

import torch

from kgen.check.loading import EmittedFile


def main(path):
    f = EmittedFile(path)
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = f.Model(*f.init_args())
        new = f.ModelNew(*f.init_args())
        ref64 = f.Model(*f.init_args()).double()
    new.load_state_dict(eager.state_dict())
    ref64.load_state_dict(eager.state_dict())
    x = torch.randn(512, f.spec.in_features, device="cuda")
    x[::7] = 0.0
    g = torch.randn(512, f.spec.out_features, device="cuda")
    for m, dtype in ((eager, torch.float32), (new, torch.float32), (ref64, torch.float64)):
        m(x.to(dtype)).backward(g.to(dtype))
    d64 = next(ref64.parameters()).grad
    for name, m in (("eager fp32", eager), ("kgen", new)):
        d = next(m.parameters()).grad
        print(f"{name}: dW finite {bool(torch.isfinite(d).all())}; max |dW - dW64| {float((d.double() - d64).abs().max()):.3e}"
              f" (max |dW64| {float(d64.abs().max()):.3e})")


if __name__ == "__main__":
    main(sys.argv[1])
