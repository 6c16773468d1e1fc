"""Session 52: a training forward (z kept) when w changes before every call, as after each
optimizer step, with and without trust (ModelNew.kgen_trust_weight_versions): every kept split is
zeroed (as s50/changed_w.py did: each row splits again) and every Linear weight's version counter is
bumped (torch.autograd.graph.increment_version: no kernel) by a forward pre-hook. Kernels' device
time per forward (s49/kernel_times.py's profiler), median of ROUNDS rounds, the files' order
turning, at each batch given; the fills not counted.

    PYTHONPATH=. python3 docs/experiments/s52/changed_w_trusted.py REF.py FILE.py [FILE.py ...] BATCH [BATCH ...]
"""
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s49"))
import kernel_times  # noqa: E402
from kb_timing_ab import load_models  # noqa: E402  (s47, on kernel_times' path)


def changing_w(model):
    # (s50/changed_w.py's forget_splits, for session 51's _KGEN_W_SPLITS: id(storage) -> (weak
    # reference, {view: split}, {view: record}))
    kept = model.forward.__func__.__globals__["_KGEN_W_SPLITS"]
    buffers = [split for entry in kept.values() for split in entry[1].values()]
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def hook(module, args):
        for b in buffers:
            b.zero_()
        for w in weights:
            torch.autograd.graph.increment_version(w)
    model.register_forward_pre_hook(hook)


def main(ref_path, *args):
    paths = [a for a in args if a.endswith(".py")]
    batches = [int(a) for a in args if not a.endswith(".py")]
    ref, _, _, _, models = load_models(ref_path, torch.float32, paths)
    k = ref["get_inputs"]()[0].shape[1]
    print(f"{torch.cuda.get_device_name()}; {ref_path}; train mode, z kept; w changed before every forward "
          f"(splits zeroed, versions bumped); device us per forward (all kernels but the fills; the split pass "
          f"in brackets), median of {kernel_times.ROUNDS} rounds x {kernel_times.ITERS} forwards")
    print("| batch | " + " | ".join(p.rsplit("/", 1)[-1] for p in paths) + " |")
    print("|---|" + "---|" * len(paths))
    for batch in batches:
        x = torch.randn(batch, k, device="cuda")
        for m in models.values():
            m.train()
            m(x)
            changing_w(m)
        runs = {p: [] for p in paths}
        splits = {p: [] for p in paths}
        for r in range(kernel_times.ROUNDS):
            for p in paths[r % len(paths):] + paths[:r % len(paths)]:
                for _ in range(3):
                    models[p](x)
                per = {n: v for n, v in kernel_times.profile(models[p], x).items() if "fill" not in n.lower()}
                runs[p].append(sum(per.values()))
                splits[p].append(sum(v for n, v in per.items() if "split" in n))
        print(f"| {batch} | " + " | ".join(f"{statistics.median(runs[p]):.1f} [{statistics.median(splits[p]):.1f}]"
                                           for p in paths) + " |", flush=True)
        for m in models.values():   # (a fresh model per batch would rebuild: the hooks are dropped instead)
            m._forward_pre_hooks.clear()


if __name__ == "__main__":
    main(*sys.argv[1:])
