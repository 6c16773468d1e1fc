"""Time emitted files of one module against each other and against eager fp32, interleaved in
one process (so the ratios share one eager measurement; each file runs right after eager), with
each file's error vs fp64.

    PYTHONPATH=. python3 scripts/compare_forward.py REF.py FILE.py [FILE.py ...] [--dtype bf16|fp16]

--dtype runs the modules and the input in that dtype (module.to(dtype), as KernelBench's eval at
that precision); eager is timed in it too, the error is still against the fp64 module.

Each FILE is exec'd as KernelBench does (its ModelNew and get_init_inputs); the files may come
from different kgen versions (an older commit's winners: what "no slower than before" means).
"""

import statistics
import sys

ROUNDS = 7  # interleaved rounds; the GPU's timing can be bimodal from one round to the next

import torch

from kgen.check.bench import time_calls


def load(path):
    ns = {"__name__": f"kgen_compare_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main(ref_path, *files, dtype="fp32"):
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    loaded = [load(f) for f in files]
    # The reference as KernelBench runs it: its Model, get_init_inputs() and get_inputs(), under
    # whatever names its constants have.
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device(device):
        model = ref["Model"](*init)
        model64 = ref["Model"](*init).double()
        news = [ns["ModelNew"](*init) for ns in loaded]
    model64.load_state_dict(model.state_dict())
    # (get_inputs()' tensors after the input, a residual or a gate, given to every call too)
    x, *extras = [t.to(device) for t in ref["get_inputs"]()]
    errors = []
    for new in news:
        new.load_state_dict(model.state_dict())
    model, news = model.to(DTYPES[dtype]), [new.to(DTYPES[dtype]) for new in news]
    x, extras = x.to(DTYPES[dtype]), [t.to(DTYPES[dtype]) for t in extras]
    x64, extras64 = x.double(), [t.double() for t in extras]   # the inputs the modules get, exactly

    def on_x(module):
        """module as a function of x alone (time_calls calls fn(x)), the inputs after it given."""
        return lambda t: module(t, *extras)

    with torch.no_grad():
        eager_error = (model(x, *extras).double() - model64(x64, *extras64)).abs().max().item()
    for new in news:
        with torch.no_grad():
            errors.append((new(x, *extras).double() - model64(x64, *extras64)).abs().max().item())
    rounds = {name: [] for name in ["eager", *files]}
    for r in range(ROUNDS):
        # Each file is timed right after an eager run, and the files' order alternates from
        # round to round: a tensor-core file timed right after another one measured up to 8 %
        # slower than after eager (the GPU's clocks depend on what ran before), so every file
        # gets the same predecessor.
        for f, new in (list(zip(files, news)) if r % 2 == 0 else list(zip(files, news))[::-1]):
            rounds["eager"].append(time_calls(on_x(model), x, 30).median_ms)
            rounds[f].append(time_calls(on_x(new), x, 30).median_ms)
    eager = statistics.median(rounds["eager"])
    print(f"{torch.cuda.get_device_name(device)}; {ref_path} input {tuple(x.shape)}: eager {dtype} {eager:.3f} ms, err {eager_error:.2e}")
    for f, err in zip(files, errors):
        ms = statistics.median(rounds[f])
        rounds_text = " ".join(f"{t:.3f}" for t in rounds[f])
        print(f"  {ms:.3f} ms  {ms / eager:.3f}x eager  err {err:.2e}  {f}  (rounds: {rounds_text})")
    print(f"  eager rounds: {' '.join(f'{t:.3f}' for t in rounds['eager'])}")


if __name__ == "__main__":
    args = sys.argv[1:]
    dtype = "fp32"
    if "--dtype" in args:
        at = args.index("--dtype")
        dtype = args[at + 1]
        del args[at:at + 2]
    main(*args, dtype=dtype)
