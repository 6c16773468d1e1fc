"""docs/experiments/s22/train_drift.py with the training check's per-step cap (validate.step_rates:
no step moves a parameter by more than TRAIN_STEP_CAP times its first step's move, the factor
taken from the fp64 run's gradient and applied to every run). Emulates the check on the CPU for
a reference at BATCH rows: eager fp32, fp64, and a second fp32 run whose first GEMM sums over the
input features in another order (the check's _second_eager). Prints each step's output error
against fp64, then each parameter's move and the two fp32 runs' distance from fp64's at the end.

    PYTHONPATH=. python docs/experiments/s23/train_capped.py [REF] [BATCH] [--no-cap] [--toward]

--toward[=C]: the loss 1/2 sum((y - t)^2) / C, t = y0 - C G (y0 the fp64 run's first output), each run's
gradient from its own y (the first step's is G, as the check's sum(G * y) has at every step).)"""
import copy, importlib.util, sys
import torch
from kgen.check.validate import (TRAIN_STEPS, TRAIN_MOVE_FACTOR, TRAIN_STEP_MARGIN, NO_GRADIENT, train_step_tol,
                                 step_rates)

args = [a for a in sys.argv[1:] if not a.startswith("--")]
ref = args[0] if args else "tests/refs/gemm_sigmoid_gemm_lse.py"
batch = int(args[1]) if len(args) > 1 else 200
capped = "--no-cap" not in sys.argv
toward = next((float(a.split("=")[1]) if "=" in a else 1.0 for a in sys.argv if a.startswith("--toward")), 0.0)
target = None
spec = importlib.util.spec_from_file_location("ref", ref)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
torch.manual_seed(0)
m32 = mod.Model(*mod.get_init_inputs())
m64 = copy.deepcopy(m32).double()
m32b = copy.deepcopy(m32)
first_w = next(n for n, p in m32.named_parameters() if p.dim() == 2)
x = torch.rand(batch, mod.get_inputs()[0].shape[1])
perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(5))
with torch.no_grad():
    m32b.get_parameter(first_w).copy_(m32b.get_parameter(first_w)[:, perm])
xb = x[:, perm].contiguous()
names = [n for n, _ in m32.named_parameters()]
start = {n: p.detach().double().clone() for n, p in m64.named_parameters()}
rates, first, g = {}, {}, None
tol = 1e-4
for step in range(TRAIN_STEPS):
    ys, now = {}, {}
    for key, model, inp, dt in (("64", m64, x.double(), torch.float64), ("32", m32, x, torch.float32), ("32b", m32b, xb, torch.float32)):
        y = model(inp)
        if g is None:
            g = torch.randn(y.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
        params = [model.get_parameter(n) for n in names]
        if toward and target is None:
            target = y.detach() - toward * g
        dldy = (y.detach() - target.to(dt)) / toward if toward else g.to(dt)
        grads = torch.autograd.grad((y * dldy).sum(), params)
        ys[key] = y.detach().double()
        if not rates:
            largest = max(float(d.abs().max()) for d in grads)
            for n, d in zip(names, grads):
                size = float(d.abs().max())
                first[n] = size
                thr = train_step_tol(tol) * (1 + float(start[n].abs().max()))
                rates[n] = 0.0 if size <= NO_GRADIENT * largest else TRAIN_STEP_MARGIN * TRAIN_MOVE_FACTOR * thr / TRAIN_STEPS / size
        if key == "64":
            now = {n: float(d.abs().max()) for n, d in zip(names, grads)}
            this_step = step_rates(rates, first, now) if capped else rates
        with torch.no_grad():
            for n, d in zip(names, grads):
                model.get_parameter(n).sub_(this_step[n] * d)
    e32 = float((ys["32"] - ys["64"]).abs().max()); e32b = float((ys["32b"] - ys["64"]).abs().max())
    print(f"step {step:2d}  |y| {float(ys['64'].abs().max()):.3e}  eager fp32 vs fp64 {e32:.2e}  "
          f"second fp32 vs fp64 {e32b:.2e}  ratio {e32b / max(e32, 1e-30):6.1f}  "
          f"smallest rate factor {min(this_step[n] / rates[n] for n in names if rates[n]):.3f}")
for n in names:
    a = (m32.get_parameter(n).detach().double() - start[n]).abs()
    d32 = float((m32.get_parameter(n).detach().double() - m64.get_parameter(n).detach()).abs().max())
    b = m32b.get_parameter(n).detach().double()
    d32b = float((b[:, torch.argsort(perm)] if n == first_w else b).sub(m64.get_parameter(n).detach()).abs().max())
    needed = TRAIN_MOVE_FACTOR * train_step_tol(tol) * (1 + float(m64.get_parameter(n).abs().max()))
    print(f"{n:16s} moved {float(a.max()):.2e} (needs {needed:.2e})  eager's drift {d32:.2e}  second run's {d32b:.2e}")
