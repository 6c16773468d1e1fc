"""Emulates kgen's training check (kgen/check/validate.py: 20 steps on sum(G * y), per-parameter
rates from fp64's first gradients) for tests/refs/gemm_sigmoid_gemm_lse.py at 200 rows on the CPU:
eager fp32, fp64, and a second fp32 run whose first GEMM sums over the input features in another
order (the check's _second_eager). Prints each step's output error against fp64, then each
parameter's move and the two fp32 runs' distance from fp64's at the end.

    PYTHONPATH=. python docs/experiments/s22/train_drift.py [BATCH]"""
import copy, importlib.util, sys
import torch
from kgen.check.validate import TRAIN_STEPS, TRAIN_MOVE_FACTOR, TRAIN_STEP_MARGIN, NO_GRADIENT, train_step_tol

spec = importlib.util.spec_from_file_location("ref", "tests/refs/gemm_sigmoid_gemm_lse.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
torch.manual_seed(0)
batch = int(sys.argv[1]) if len(sys.argv) > 1 else 200
m32 = mod.Model(*mod.get_init_inputs())
m64 = copy.deepcopy(m32).double()
m32b = copy.deepcopy(m32)
x = torch.rand(batch, mod.in_features)
perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(5))
with torch.no_grad():
    m32b.linear1.weight.copy_(m32b.linear1.weight[:, perm])
xb = x[:, perm].contiguous()
g = torch.randn(batch, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
names = [n for n, _ in m32.named_parameters()]
start = {n: p.detach().double().clone() for n, p in m64.named_parameters()}
rates = {}
tol = 1e-4
for step in range(TRAIN_STEPS):
    ys = {}
    for key, model, inp, dt in (("64", m64, x.double(), torch.float64), ("32", m32, x, torch.float32), ("32b", m32b, xb, torch.float32)):
        y = model(inp)
        params = [model.get_parameter(n) for n in names]
        grads = torch.autograd.grad((y * g.to(dt)).sum(), params)
        ys[key] = y.detach().double()
        if not rates:
            largest = max(float(d.abs().max()) for d in grads)
            for n, d in zip(names, grads):
                size = float(d.abs().max())
                thr = train_step_tol(tol) * (1 + float(start[n].abs().max()))
                rates[n] = 0.0 if size <= NO_GRADIENT * largest else TRAIN_STEP_MARGIN * TRAIN_MOVE_FACTOR * thr / TRAIN_STEPS / size
        with torch.no_grad():
            for n, d in zip(names, grads):
                model.get_parameter(n).sub_(rates[n] * d)
    e32 = float((ys["32"] - ys["64"]).abs().max()); e32b = float((ys["32b"] - ys["64"]).abs().max())
    print(f"step {step:2d}  |y| {float(ys['64'].abs().max()):.3e}  eager fp32 vs fp64 {e32:.2e}  "
          f"second fp32 vs fp64 {e32b:.2e}  ratio {e32b / max(e32, 1e-30):6.1f}")
moves = {}
for n in names:
    a = (m32.get_parameter(n).detach().double() - start[n]).abs()
    d32 = float((m32.get_parameter(n).detach().double() - m64.get_parameter(n).detach()).abs().max())
    b = m32b.get_parameter(n).detach().double()
    d32b = float((b[:, torch.argsort(perm)] if n == "linear1.weight" else b).sub(m64.get_parameter(n).detach()).abs().max())
    print(f"{n:16s} moved {float(a.max()):.2e}  eager's drift {d32:.2e}  second run's {d32b:.2e}")
