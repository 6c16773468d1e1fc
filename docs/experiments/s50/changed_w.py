"""Session 50: w's kept split (fp16x3 above 512 rows) when w changes before every forward, as in
training, where each step's optimizer writes every row: s49/kernel_times.py's kernels of one
training forward of each file, with every kept split zeroed by a forward pre-hook (no row
recorded: each split again, as after a step). A file without kept splits (before session 50) has
as many floats of its own zeroed there, so that both forwards start with as much of the L2 cache
dirty (call D zeroed the new file's alone: 39's pass read as 14 us slower, the write-back of the
fill's lines). The fills are not counted.

    PYTHONPATH=. python3 docs/experiments/s50/changed_w.py REF.py fp32 FILE.py [FILE.py ...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s49"))
import kernel_times  # noqa: E402


def forget_splits(model, x):
    splits = model.forward.__func__.__globals__.get("_KGEN_W_SPLITS")
    if splits is not None:
        buffers = [split for per_weight in splits.values() for split in per_weight.values()]
    else:   # (the same floats as a kept split: w's halves, a shift and a 16-byte record per row)
        buffers = [torch.empty(m.weight.numel() + 5 * m.weight.shape[0], device="cuda")
                   for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def hook(module, args):
        for b in buffers:
            b.zero_()
    model.register_forward_pre_hook(hook)


if __name__ == "__main__":
    kernel_times.main(*sys.argv[1:], prepare=forget_splits, counted=lambda kernel: "fill" not in kernel.lower(),
                      note="every kept split (before session 50: as many floats) zeroed before each forward, "
                           "the fill not counted; ")
