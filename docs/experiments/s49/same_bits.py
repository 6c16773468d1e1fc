"""Session 49: two emitted files of one KernelBench module (before and after a change that should
not move a bit), in training mode with gradients wanted, as KernelBench's eval runs them: their
outputs, and after one backward of the same output gradient the input's and every parameter's
gradients, compared bit for bit; eager's error vs fp64 beside kgen's.

    PYTHONPATH=. python3 docs/experiments/s49/same_bits.py REF.py {bf16,fp16,fp32} OLD.py NEW.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s47"))
from kb_timing_ab import DTYPES, load_models  # noqa: E402


def run(model, x, g):
    x = x.clone().requires_grad_(True)
    out = model(x)
    out.backward(g)
    return [("output", out.detach()), ("dx", x.grad)] + [(f"d{n}", p.grad) for n, p in model.named_parameters()]


def main(ref_path, dtype_name, old_path, new_path):
    dtype = DTYPES[dtype_name]
    ref, init, _, state, files = load_models(ref_path, dtype, [old_path, new_path])
    models = {"old": files[old_path].train(), "new": files[new_path].train()}
    x = ref["get_inputs"]()[0].cuda()
    torch.manual_seed(1)
    g = torch.randn_like(models["old"](x.to(dtype)))
    results = {name: run(m, x.to(dtype), g) for name, m in models.items()}
    copies = {}
    for name, to in (("fp64", torch.float64), ("eager", dtype)):
        with torch.device("cuda"):
            copies[name] = ref["Model"](*init)
        copies[name].load_state_dict(state)
        copies[name].to(to).train()
    exact = run(copies["fp64"], x.double(), g.double())
    eager_own = run(copies["eager"], x.to(dtype), g)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}")
    print("| value | old == new, bit for bit | kgen's max error vs fp64 | eager's |")
    print("|---|---|---|---|")
    same_all = True
    for (name, a), (_, b), (_, e), (_, o) in zip(results["old"], results["new"], exact, eager_own):
        same = torch.equal(a, b)
        same_all &= same
        err = (b.double() - e).abs().max().item()
        err_eager = (o.double() - e).abs().max().item()
        print(f"| {name} | {same} | {err:.3e} | {err_eager:.3e} |")
    print("all the same bits" if same_all else "BITS DIFFER")


if __name__ == "__main__":
    main(*sys.argv[1:])
