"""Forward + backward of an emitted file against eager fp32 (and eager with TF32 allowed), in one
process, with the gradients' errors against fp64 beside the times.

    PYTHONPATH=. python3 scripts/bench_training.py REF.py FILE.py

One training step's work is timed (for the file, eager fp32, eager with TF32 allowed and
torch.compile of the reference in fp32): y = model(x); y.backward(g) (parameter gradients set
to None before each call), twice: as a first layer (x needs no gradient: eager computes dW alone) and as
an inner layer (x needs its gradient too), with kgen.check.bench.time_calls (CUDA events, L2 flushed,
warm-up, median of 30); eager fp32 and the file alternate over 5 rounds so that neither always
runs first, and each line gives the median of the rounds' medians with their smallest and
largest. The errors: max abs of dL/dx and of each parameter's gradient against fp64 autograd of
the reference, for the file and for eager fp32.
"""

import statistics
import sys

import torch

from kgen.check.bench import time_calls, training_step
from kgen.check.kinks import gradients
from kgen.check.loading import EmittedFile

ROUNDS = 5


def main(ref_path, path):
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    # The file's workload (its spec: the reference's constants live in the file's copy of it),
    # and its Model and ModelNew as the checks call them: with x alone, a module whose
    # get_inputs() gives tensors after the input gets the reference's draws of them at x's rows
    # (Reference.given_extra_inputs).
    f = EmittedFile(path, ref_path)
    batch, in_features, out_features = f.spec.batch, f.spec.in_features, f.spec.out_features
    torch.manual_seed(0)
    with torch.device(device):
        new = f.ModelNew(*f.init_args())
        eager = f.Model(*f.init_args())
    eager.load_state_dict(new.state_dict())
    exact = f.Model(*f.init_args()).to(device).double()
    exact.load_state_dict(new.state_dict())
    x = torch.rand(batch, in_features, device=device)
    g = torch.randn(new(x).shape, device=device)
    names = ["x"] + [name for name, _ in new.named_parameters()]
    fp64 = gradients(exact, x.double(), g)
    errors = {}
    for label, model in (("kgen", new), ("eager fp32", eager)):
        errors[label] = [(a.double() - e).abs().max().item() for a, e in zip(gradients(model, x, g), fp64)]
    print(f"{torch.cuda.get_device_name(device)}; {ref_path}; {path}")
    # torch.compile (default mode) of the reference, with the same parameters: the first call
    # compiles (time_calls warms up first).
    compiled = torch.compile(eager)
    for layer, inp in (("first layer (no dL/dx)", x), ("inner layer (dL/dx too)", x.detach().clone().requires_grad_())):
        times = {"eager fp32": [], "kgen": [], "eager TF32 allowed": [], "torch.compile fp32": []}
        for r in range(ROUNDS):
            order = [("eager fp32", eager), ("kgen", new)]
            for label, model in (order if r % 2 == 0 else order[::-1]):
                times[label].append(time_calls(training_step(model, g), inp, 30, grad=True).median_ms)
            torch.backends.cuda.matmul.allow_tf32 = True
            times["eager TF32 allowed"].append(time_calls(training_step(eager, g), inp, 30, grad=True).median_ms)
            torch.backends.cuda.matmul.allow_tf32 = False
            times["torch.compile fp32"].append(time_calls(training_step(compiled, g), inp, 30, grad=True).median_ms)
        print(f"forward + backward, {layer}, batch {batch}, {in_features} -> {out_features}:")
        eager_ms = statistics.median(times["eager fp32"])
        for label, t in times.items():
            ms = statistics.median(t)
            print(f"  {label:20s} {ms:7.3f} ms (rounds {min(t):.3f} to {max(t):.3f})  {ms / eager_ms:.3f}x eager fp32")
    print("gradient max abs error vs fp64 (kgen / eager fp32):")
    for i, name in enumerate(names):
        print(f"  {name:20s} {errors['kgen'][i]:.2e} / {errors['eager fp32'][i]:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:])
