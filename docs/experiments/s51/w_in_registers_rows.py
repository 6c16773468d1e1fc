"""Session 51: where w in registers stops paying, now that w's split is kept from call to call.

spec.FP16X3_W_IN_REGISTERS_MAX_ROWS (512) was measured (session 22) against a pass that split w
afresh on every call (8 bytes moved per element of w); the kept split (session 50) moves 4. Each
emitted file given is copied twice with its GEMM's W_IN_REGISTERS_MAX_ROWS template argument
rewritten: 0 (the pass at every batch, the kept split) and 1 << 30 (w in registers at every
batch); the three run at each batch, their kernels' device time per forward (torch's profiler,
ITERS forwards queued back to back, median of ROUNDS rounds, the order turning), eval mode under
no_grad and training mode (z kept), beside eager's.

    PYTHONPATH=. python3 docs/experiments/s51/w_in_registers_rows.py REF.py FILE.py BATCH [BATCH ...] [OTHER.py ...]

OTHER.py: more emitted files of REF run beside them (another math: tf32x3's file).
"""
import collections
import os
import re
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s47"))
from kb_timing_ab import load, load_models  # noqa: E402

ROUNDS, ITERS = 3, 10


def variants(path):
    text = open(path).read()
    # the fp16x3 GEMM's template: <BM, BN, STAGES, FLUSH, GROUP_M, W_IN_REGISTERS_MAX_ROWS>
    pattern = re.compile(r"(WgmmaWsF16x3Gemm<\d+, \d+, \d+, \d+, \d+, )(\d+)>")
    assert pattern.search(text), f"{path}: no fp16x3 GEMM with w in registers"
    out = {"as emitted": path}
    if os.environ.get("S51_AS_EMITTED"):   # (the file alone: call D's tf32x3 / fp16x3 shapes)
        return out
    for label, rows in (("pass always", 0), ("registers always", 1 << 30)):
        os.makedirs("/tmp/s51v", exist_ok=True)
        p = f"/tmp/s51v/{os.path.basename(path)[:-3]}_rows{rows}.py"
        open(p, "w").write(pattern.sub(lambda m: m.group(1) + str(rows) + ">", text))
        out[label] = p
    return out


def device_us(model, x):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            model(x)
        torch.cuda.synchronize()
    per = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            name = e.name.split("<")[0].split("(")[0].split("::")[-1].replace("void ", "")
            per[name] += e.time_range.elapsed_us() / ITERS
    return per


def main(ref_path, path, *args):
    """(With no batches: writes the two copies to /tmp/s51v/ only, for builds in parallel first.)"""
    batches = [a for a in args if not a.endswith(".py")]
    files = variants(path)
    files.update({os.path.basename(a)[:-3]: a for a in args if a.endswith(".py")})
    if not batches:
        return
    ref, init, eager, state, models = load_models(ref_path, torch.float32, list(files.values()))
    named = {"eager": eager, **{label: models[p] for label, p in files.items()}}
    k = ref["get_inputs"]()[0].shape[1]
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {path}; K {k}; device us per forward "
          f"(all kernels; the split pass in brackets), median of {ROUNDS} rounds x {ITERS} forwards")
    print("| batch | mode | " + " | ".join(named) + " |")
    print("|---|---|" + "---|" * len(named))
    for batch in map(int, batches):
        x = torch.randn(batch, k, device="cuda")
        for mode in ("eval", "train"):
            runs = {n: [] for n in named}
            splits = {n: [] for n in named}
            names = list(named)
            for r in range(ROUNDS):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    m = named[n].train(mode == "train")
                    with torch.set_grad_enabled(mode == "train"):
                        for _ in range(3):
                            m(x)
                        per = device_us(m, x)
                    runs[n].append(sum(per.values()))
                    splits[n].append(sum(v for kname, v in per.items() if "split" in kname))
            cells = []
            for n in named:
                s = statistics.median(splits[n])
                cells.append(f"{statistics.median(runs[n]):.1f}" + (f" [{s:.1f}]" if s else ""))
            print(f"| {batch} | {mode} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
