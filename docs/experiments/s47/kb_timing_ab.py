"""Session 47: emitted files of one KernelBench module against each other and eager, timed as
KernelBench's eval times them (timing.py, "cuda_event": L2 thrashed by a 256 MB fill, a CUDA
event recorded, one forward, another event, synchronize; the module in training mode with its
parameters wanting gradients, as the eval leaves them) and, beside that, one synchronized eval-mode
forward under torch.no_grad by the host's clock. Rounds alternate between the models (one process);
the median of each model's trials over all rounds. From session 49 the models' order turns by one
each round: with a fixed order a model's place in the round moved its time (session 49, call C,
12 in fp32: eager, old, new, bulk and a second copy of new at 766, 787, 813 and 813 us, the two
copies of one build 26 us apart).

    PYTHONPATH=. python3 docs/experiments/s47/kb_timing_ab.py REF.py {bf16,fp16,fp32} FILE.py [FILE.py ...]
"""
import os
import statistics
import sys
import time

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (KGEN_AB_ROUNDS: more rounds where the host's speed drifts during a run; session 48)
ROUNDS, TRIALS = int(os.environ.get("KGEN_AB_ROUNDS", 7)), 30


def load(path):
    ns = {"__name__": f"kgen_s47_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def load_models(ref_path, dtype, paths):
    """The reference (its namespace), its init arguments, its eager module built on the GPU with
    seed 0 and that module's state, and each emitted file's ModelNew with that state, in dtype
    (the eager module left in fp32). (Session 49's s49/ scripts build theirs with this too.)"""
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init)
    state = eager.state_dict()
    models = {}
    for path in paths:
        with torch.device("cuda"):
            m = load(path)["ModelNew"](*init)
        m.load_state_dict(state)
        models[path] = m.to(dtype)
    return ref, init, eager, state, models


def kernelbench_trial(model, x):
    dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda")
    dummy.fill_(42)
    del dummy
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    model(x)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3


def synchronized_trial(model, x):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def main(ref_path, dtype_name, *paths):
    dtype = DTYPES[dtype_name]
    ref, _, eager, _, files = load_models(ref_path, dtype, paths)
    models = {"eager": eager.to(dtype), **files}
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    times = {(name, how): [] for name in models for how in ("kb", "sync")}
    names = list(models)
    for round_ in range(ROUNDS):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            model = models[name]
            model.train()
            for _ in range(3):
                kernelbench_trial(model, x)
            times[(name, "kb")] += [kernelbench_trial(model, x) for _ in range(TRIALS)]
            model.eval()
            with torch.no_grad():
                for _ in range(3):
                    synchronized_trial(model, x)
                times[(name, "sync")] += [synchronized_trial(model, x) for _ in range(TRIALS)]
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {dtype_name}; x {tuple(x.shape)}; {ROUNDS} rounds x {TRIALS}")
    print("| model | KernelBench's timing (train mode, grad) us | x eager | synchronized no_grad eval us | x eager |")
    print("|---|---|---|---|---|")
    base = {how: statistics.median(times[("eager", how)]) for how in ("kb", "sync")}
    for name in models:
        kb, sync = (statistics.median(times[(name, how)]) for how in ("kb", "sync"))
        print(f"| {name.rsplit('/', 2)[-2] + '/' + name.rsplit('/', 1)[-1] if '/' in name else name} | {kb:.1f} | "
              f"{kb / base['kb']:.3f} | {sync:.1f} | {sync / base['sync']:.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
