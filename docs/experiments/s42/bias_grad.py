"""Session 42: where the error of a scalar parameter's gradient (tests/refs/gemm_bn_bias_div_swish's
`bias`, shape (1,)) comes from in a bf16 module, inside bf16 autocast and outside it: eager, kgen's
plain bf16 build, kgen's build for autocast (via the C++ node and via the Python node), each
against the fp64 module; the same for the per-feature gradients beside it.

    PYTHONPATH=. python3 docs/experiments/s42/bias_grad.py FILE.py [bf16|fp32 module] [eval|train]
"""
import contextlib
import os
import sys

import torch

from kgen.check.loading import EmittedFile


def main(path, module="bf16", mode="eval"):
    dtype = torch.bfloat16 if module == "bf16" else torch.float32
    f = EmittedFile(path)
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = f.Model(*f.init_args()).to(dtype)
        new = f.ModelNew(*f.init_args()).to(dtype)
        exact = f.Model(*f.init_args()).double()
    new.load_state_dict(eager.state_dict())
    exact.load_state_dict(eager.state_dict())
    state = {k: v.clone() for k, v in eager.state_dict().items()}
    for m in (eager, new, exact):
        m.train(mode == "train")
    x = torch.rand(f.spec.batch, f.spec.in_features, device="cuda")
    g = torch.randn(f.spec.batch, f.spec.out_features, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5))
    x64 = x.to(dtype).double().requires_grad_()
    out64 = exact(x64)
    out64.backward(g.to(torch.bfloat16).double())
    ref = {n: p.grad for n, p in exact.named_parameters()}
    ref["input"] = x64.grad
    print(f"{torch.cuda.get_device_name()}; {path}; {module} module, {mode}; g rounded to bf16 for all")
    for name, model, autocast, python in (("eager", eager, False, "0"), ("eager autocast", eager, True, "0"),
                                          ("kgen", new, False, "0"), ("kgen autocast", new, True, "0"),
                                          ("kgen autocast, Python node", new, True, "1")):
        if autocast is False and dtype == torch.float32 and model is new:
            continue   # (kgen's fp32 kernels: not this question)
        os.environ["KGEN_PYTHON_AUTOGRAD"] = python
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        xi = x.to(dtype).requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            out = model(xi)
        out.backward(g.to(torch.bfloat16).to(out.dtype))
        errs = {n: (p.grad.double() - ref[n]).abs().max().item() for n, p in model.named_parameters()}
        errs["input"] = (xi.grad.double() - ref["input"]).abs().max().item()
        errs["output"] = (out.double() - out64).abs().max().item()
        bias = dict(model.named_parameters())["bias"].grad
        print(f"{name:28s} bias grad {bias.float().item():.4f} (fp64 {ref['bias'].item():.4f}); "
              + "; ".join(f"{n} {e:.3e}" for n, e in errs.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
