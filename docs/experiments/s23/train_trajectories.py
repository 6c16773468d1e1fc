"""The training check's trajectories, step by step, on the GPU: an emitted file (ModelNew), eager
fp32, two more eager fp32 runs that round differently (the first GEMM summed over a permuted
input order, as validate._second_eager does; the input moved by x (1 + 2^-22 r)), all against
fp64, with the check's rates (validate: TRAIN_MOVE_FACTOR, TRAIN_STEP_MARGIN) and, unless
--no-cap, its per-step cap (validate.step_rates). Prints each run's max abs output error against
fp64 at every step.

    PYTHONPATH=. python docs/experiments/s23/train_trajectories.py FILE BATCH [--no-cap]"""
import copy, sys
import torch
from kgen.check.loading import EmittedFile
from kgen.check.validate import (TRAIN_STEPS, TRAIN_MOVE_FACTOR, TRAIN_STEP_MARGIN, NO_GRADIENT, train_step_tol,
                                 step_rates)

path, batch = sys.argv[1], int(sys.argv[2])
capped = "--no-cap" not in sys.argv
f = EmittedFile(path)
dev = torch.device("cuda")
with torch.device(dev):
    torch.manual_seed(0)
    ref = f.Model(*f.init_args())
    torch.manual_seed(0)
    new = f.ModelNew(*f.init_args())
new.load_state_dict(ref.state_dict())
ref64 = copy.deepcopy(ref).double()
perm_model = copy.deepcopy(ref)
noise_model = copy.deepcopy(ref)
first_w = next(n for n, p in ref.named_parameters() if p.dim() == 2)
in_features = ref.get_parameter(first_w).shape[1]
x = torch.rand(batch, in_features, device=dev, generator=torch.Generator(device=dev).manual_seed(1))
perm = torch.randperm(in_features, generator=torch.Generator().manual_seed(5)).to(dev)
with torch.no_grad():
    perm_model.get_parameter(first_w).copy_(perm_model.get_parameter(first_w)[:, perm])
x_perm = x[:, perm].contiguous()
x_noise = x * (1 + 2.0 ** -22 * torch.randn(x.shape, device=dev, generator=torch.Generator(device=dev).manual_seed(5)))
runs = {"fp64": (ref64, x.double()), "kgen": (new, x), "eager": (ref, x), "eager, permuted sum": (perm_model, x_perm),
        "eager, x moved an ulp": (noise_model, x_noise)}
for m, _ in runs.values():
    m.train(True)
names = [n for n, p in ref.named_parameters()]
start = {n: p.detach().double().clone() for n, p in ref64.named_parameters()}
rates, first, g = {}, {}, None
print(f"{f.spec.math} at {batch} rows, cap {'on' if capped else 'off'}; max abs error against fp64 per step")
print("step  |y|       " + "  ".join(f"{k:>22s}" for k in runs if k != "fp64") + "  rate factor")
for step in range(TRAIN_STEPS):
    ys = {}
    for key, (model, inp) in runs.items():
        y = model(inp)
        if g is None:
            g = torch.randn(y.shape, device=dev, generator=torch.Generator(device=dev).manual_seed(3), dtype=torch.float64)
        params = [model.get_parameter(n) for n in names]
        grads = torch.autograd.grad((y * g.to(y.dtype)).sum(), params)
        ys[key] = y.detach().double()
        if key == "fp64":
            sizes = {n: float(d.abs().max()) for n, d in zip(names, grads)}
            if not rates:
                first, largest = sizes, max(sizes.values())
                for n in names:
                    thr = train_step_tol(1e-4) * (1 + float(start[n].abs().max()))
                    rates[n] = 0.0 if sizes[n] <= NO_GRADIENT * largest else TRAIN_STEP_MARGIN * TRAIN_MOVE_FACTOR * thr / TRAIN_STEPS / sizes[n]
            this_step = step_rates(rates, first, sizes) if capped else rates
        with torch.no_grad():
            for n, d in zip(names, grads):
                model.get_parameter(n).sub_(this_step[n] * d)
    errs = [float((ys[k] - ys["fp64"]).abs().max()) for k in runs if k != "fp64"]
    factor = min(this_step[n] / rates[n] for n in names if rates[n])
    print(f"{step:4d}  {float(ys['fp64'].abs().max()):8.3e}  " + "  ".join(f"{e:22.2e}" for e in errs) + f"  {factor:.3f}", flush=True)
