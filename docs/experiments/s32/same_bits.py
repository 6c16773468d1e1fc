"""Whether emitted files of one module give the same bits: each file's ModelNew built as
KernelBench builds it (seeded), the first file's state loaded into the others, one input, in
training and eval mode. For a change that must not move any output (session 32: GroupNorm's
statistics of small groups by segments of a warp, the group size as a constant).

    PYTHONPATH=. python3 docs/experiments/s32/same_bits.py REF.py A.py B.py [--dtype bf16]
"""
import sys

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def load(path):
    ns = {"__name__": f"kgen_same_bits_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def main():
    args = sys.argv[1:]
    dtype = torch.float32
    if "--dtype" in args:
        i = args.index("--dtype")
        dtype = DTYPES[args[i + 1]]
        del args[i:i + 2]
    ref, files = load(args[0]), [load(p) for p in args[1:]]
    torch.manual_seed(0)
    models = []
    for ns in files:
        torch.manual_seed(42)
        models.append(ns["ModelNew"](*ref["get_init_inputs"]()).cuda().to(dtype))
    for m in models[1:]:
        m.load_state_dict(models[0].state_dict())
    torch.manual_seed(1)
    x = [t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in ref["get_inputs"]()]
    for mode in ("train", "eval"):
        outs = []
        with torch.no_grad():
            for m in models:
                m.train(mode == "train")
                torch.manual_seed(2)   # (a dropout's mask: the same draw for every file; session 33)
                outs.append(m(*x).float())
        for p, o in zip(args[2:], outs[1:]):
            same = torch.equal(o, outs[0])
            diff = (o - outs[0]).abs().max().item()
            print(f"{'SAME' if same else 'DIFFERENT'}  {mode}  max |diff| {diff:.3e}  {args[1]} vs {p}")


main()
