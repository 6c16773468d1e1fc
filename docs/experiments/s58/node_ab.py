"""Session 58: the C++ autograd node as a Node of its own (7575355) against the node as a
torch::autograd::Function (7505d78), each in an emitted file of the same reference and variant:
the host's time to queue one forward in training mode (parameters wanting gradients: how
KernelBench's eval times a file) and one step's synchronized wall (forward, backward), eager
beside them, interleaved (ROUNDS rounds of CALLS calls, the order rotating); and the gradients of
both files bit for bit.

    PYTHONPATH=. python3 docs/experiments/s58/node_ab.py REF.py OLD.py NEW.py [fp32|bf16]
"""
import statistics
import sys
import time

import torch

ROUNDS, CALLS = 15, 20


def load(path):
    ns = {"__name__": f"kgen_s58_{abs(hash(path))}"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def quantiles(values):
    q = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.1f} ({q[1]:.1f}-{q[7]:.1f})"


def main(ref_path, old_path, new_path, dtype="fp32"):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    ref = load(ref_path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        models = {"eager": ref["Model"](*init), "old node": load(old_path)["ModelNew"](*init),
                  "new node": load(new_path)["ModelNew"](*init)}
    for m in models.values():
        m.load_state_dict(models["eager"].state_dict())
        m.to(dtype)
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    grads = {}
    for n, m in models.items():
        for _ in range(10):
            m(x)
        m.zero_grad()
        xg = x.clone().requires_grad_(True)
        m(xg).float().square().sum().backward()
        grads[n] = [xg.grad] + [p.grad for p in m.parameters()]
    same = all(torch.equal(a, b) for a, b in zip(grads["old node"], grads["new node"]))
    torch.cuda.synchronize()
    queued, steps = ({n: [] for n in models} for _ in range(2))
    names = list(models)
    for r in range(ROUNDS):
        for n in names[r % len(names):] + names[:r % len(names)]:
            m = models[n]
            for _ in range(CALLS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = m(x)
                t1 = time.perf_counter()
                out.sum().backward()
                torch.cuda.synchronize()
                queued[n].append((t1 - t0) * 1e6)
                steps[n].append((time.perf_counter() - t0) * 1e6)
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {str(dtype)[6:]}; x {tuple(x.shape)}; "
          f"{ROUNDS} rounds of {CALLS} calls, interleaved; old and new gradients bit for bit the same: {same}")
    for n in names:
        print(f"{n:9s} forward queued in {quantiles(queued[n])} us; a step (forward, backward) {quantiles(steps[n])} us")


if __name__ == "__main__":
    main(*sys.argv[1:])
