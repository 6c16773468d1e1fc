"""Session 54: why `training, 20 steps` fails for 2048 x 1024 -> 32 (Linear, x2, LeakyReLU) on
fp16x3's 64x64 tiles (session 53, call D): at each step of check_training, the output elements
whose sign (the LeakyReLU's side) differs from the fp64 run's, for ModelNew and the two eager
runs, split by whether the step's kink mask left them out (g = 0 there), with |y64| of each
unmasked one; then the check's result. check_training's own code runs; kink_free_gradient and
Comparison.add are wrapped to see the step's mask and outputs.

    PYTHONPATH=. python3 docs/experiments/s54/training_flips.py FILE.py
"""
import sys

import torch

import kgen.check.validate as validate
from kgen.check.loading import EmittedFile


def main(path):
    f = EmittedFile(path)
    masks, steps = [], []
    free = validate.kink_free_gradient

    def kink_free_gradient(*args, **kwargs):
        g, note = free(*args, **kwargs)
        masks.append(g == 0)
        return g, note

    add = validate.Comparison.add

    def add_seen(self, what, new, ref32, ref64, *args, **kwargs):
        if what.startswith("step "):
            steps.append((what, new.detach().clone(), ref32.detach().clone(), ref64.detach().clone()))
        return add(self, what, new, ref32, ref64, *args, **kwargs)

    validate.kink_free_gradient = kink_free_gradient
    validate.Comparison.add = add_seen
    r = validate.check_training(f, torch.device("cuda"), 1e-4, f.spec.batch)
    print(f"{torch.cuda.get_device_name()}; {path}; check_training: passed={r.passed}; {r.detail}")
    for (what, new, ref32, ref64), mask in zip(steps, masks):
        mask = mask.to(new.device)
        flips = (torch.sign(new) != torch.sign(ref64)) & (ref64 != 0)
        eager_flips = (torch.sign(ref32) != torch.sign(ref64)) & (ref64 != 0)
        unmasked = flips & ~mask
        print(f"{what}: masked {int(mask.sum())}; file's flips {int(flips.sum())} ({int(unmasked.sum())} unmasked), "
              f"eager's {int(eager_flips.sum())} ({int((eager_flips & ~mask).sum())} unmasked)"
              + ("; unmasked |y64|: " + ", ".join(f"{v:.2e}" for v in ref64[unmasked].abs().double().tolist()[:8])
                 if bool(unmasked.any()) else ""))
        near = (ref64.abs() < 1e-5) & ~mask
        if bool(near.any()):
            print(f"    unmasked |y64| < 1e-5: {int(near.sum())}: " + ", ".join(
                f"{v:.2e}" for v in ref64[near].abs().double().tolist()[:8]))


if __name__ == "__main__":
    main(sys.argv[1])
