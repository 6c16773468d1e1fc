"""Session 48: how much of an emitted file's time under KernelBench's own timing is its host's
work before the launch, and how much is the fp32 z its training-mode forward keeps. One
KernelBench module, one file, timed as KernelBench's eval times it (s47/kb_timing_ab.py's trial:
the 256 MB fill, CUDA events around one forward, training mode) in five ways, rounds alternating
(one process):

- eager: the reference Model, its parameters wanting gradients (as the eval leaves them);
- file: ModelNew, its parameters wanting gradients (the forward keeps z for a backward);
- file, no gradient wanted: the parameters' requires_grad off (nothing kept: the inference path);
- bare launch, z kept: only the output's (and z's) allocation and the C entry, called through
  ctypes with the arguments the file's own forward passed it: the least host work a launch of the
  same kernels can have, with the same GPU work as `file`;
- bare launch, nothing kept: the same with z_out NULL (the GPU work of the no-gradient row).

    PYTHONPATH=. python3 docs/experiments/s48/host_ceiling.py REF.py {bf16,fp16,fp32} FILE.py
"""
import statistics
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/s47")
from kb_timing_ab import DTYPES, ROUNDS, TRIALS, kernelbench_trial, load  # noqa: E402


def captured_values(ns, library, model, x):
    """The C entry's arguments of one forward of `model` on x, by name (part 0; one-part files)."""
    real = library.kgen_forward_0
    seen = {}

    def spy(*values):
        seen["values"] = list(values)
        return real(*values)
    library.kgen_forward_0 = spy
    try:
        kept = model(x)
    finally:
        library.kgen_forward_0 = real
    return dict(zip([name for name, _ in ns["_KGEN_FORWARD_ARGS"][0]], seen["values"])), kept


def bare_launch(ns, library, values, out_shape, out_dtype, z_floats, workspace):
    names = [name for name, _ in ns["_KGEN_FORWARD_ARGS"][0]]
    entry = library.kgen_forward_0
    values = dict(values, workspace=None if workspace is None else workspace.data_ptr())
    order = list(names)
    i_out, i_z = order.index("out"), order.index("z_out")
    base = [values[n] for n in order]
    device = torch.device("cuda", torch.cuda.current_device())

    def forward(x):
        out = torch.empty(out_shape, device=device, dtype=out_dtype)
        args = base.copy()
        args[i_out] = out.data_ptr()
        if z_floats:
            z = torch.empty(z_floats, device=device, dtype=torch.float32)
            args[i_z] = z.data_ptr()
        else:
            args[i_z] = None
        error = entry(*args)
        if error is not None:
            raise RuntimeError(error.decode())
        return out
    return forward


def main(ref_path, dtype_name, path):
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = DTYPES[dtype_name]
    ref, ns = load(ref_path), load(path)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        eager = ref["Model"](*init).to(dtype)
        model = ns["ModelNew"](*init).to(dtype)
        frozen = ns["ModelNew"](*init).to(dtype)
    model.load_state_dict(eager.state_dict())
    frozen.load_state_dict(eager.state_dict())
    for p in frozen.parameters():
        p.requires_grad_(False)
    x = ref["get_inputs"]()[0].cuda().to(dtype)
    assert len(ns["_KGEN_FORWARD_ARGS"]) == 1, "one GEMM part only"
    for m in (eager, model, frozen):
        m.train()
    model(x), frozen(x)
    lin = next(m for m in eager.modules() if isinstance(m, torch.nn.Linear))
    library = ns["_kgen_build"](x.device, x.dtype, False, False)
    M, K = x.shape
    N = lin.weight.shape[0]
    floats = ns["_kgen_workspace_floats"](library, 0, x.device, M, N, K)
    workspace = torch.empty(floats, device="cuda", dtype=torch.float32) if floats else None
    with_z, kept = captured_values(ns, library, model, x)
    without_z, _ = captured_values(ns, library, frozen, x)
    z_floats = with_z["z_out"] is not None
    # z's length: an upper bound of what the file's _kgen_kept allocates (M * N, then at most 5
    # values a column and 1 a row): the bare launch hands the kernels its pointer only.
    z_numel = ns["_kgen_kept"](x, lin.weight, 5, 1, 1).numel()   # an upper bound: 5 per column, 1 per row
    shape = ns["_kgen_output_shape"](0, M, N)
    out_dtype = x.dtype if ns["_KGEN_OUTPUT_TYPED"][library][0] else torch.float32
    models = {
        "eager": eager,
        "file": model,
        "file, no gradient wanted": frozen,
        "bare launch, z kept": bare_launch(ns, library, with_z, shape, out_dtype, z_numel if z_floats else 0, workspace),
        "bare launch, nothing kept": bare_launch(ns, library, without_z, shape, out_dtype, 0, workspace),
    }
    times = {name: [] for name in models}
    for _ in range(ROUNDS):
        for name, m in models.items():
            for _ in range(3):
                kernelbench_trial(m, x)
            times[name] += [kernelbench_trial(m, x) for _ in range(TRIALS)]
    print(f"{torch.cuda.get_device_name()}; {ref_path}; {path}; {dtype_name}; x {tuple(x.shape)}; "
          f"{ROUNDS} rounds x {TRIALS}; z kept by the file: {bool(z_floats)}")
    print("| how | KernelBench's timing us (median) | x eager |")
    print("|---|---|---|")
    base = statistics.median(times["eager"])
    for name in models:
        t = statistics.median(times[name])
        print(f"| {name} | {t:.1f} | {t / base:.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
