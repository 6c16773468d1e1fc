"""Session 46: s43/autocast_table.py's table (KernelBench's files inside bf16 autocast, the module
fp32 in training mode, eager against `kgen generate`'s file, interleaved in one process) with a
column more: inference queued, CALLS calls back to back and one synchronize (the GPU's time a call
where the host keeps ahead, as a serving loop runs), beside s43's synchronized calls (the host's
time to launch a call counts too). Since session 46 an fp32 module's inference there leaves its
weight fp32 for kgen's round16 GEMM (no conversion of it), and its training step converts it once,
as before.
    PYTHONPATH=. python3 docs/experiments/s46/autocast_table.py OUT_DIR REF.py [REF.py ...]"""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, "docs/experiments/s37")
from step_kernels import load  # noqa: E402

# (session 43's table, whose measure() takes the queued column: loaded by path, as it shares this
# file's name)
_s43 = importlib.util.spec_from_file_location("s43_autocast_table", "docs/experiments/s43/autocast_table.py")
s43 = importlib.util.module_from_spec(_s43)
_s43.loader.exec_module(s43)
ROUNDS, CALLS, measure = s43.ROUNDS, s43.CALLS, s43.measure


def main(out_dir, *refs):
    print(f"{torch.cuda.get_device_name()}; bf16 autocast; {ROUNDS} rounds of {CALLS} calls, interleaved")
    print("| file | rows | inference: eager ms | kgen ms | kgen / eager | queued: eager ms | kgen ms | kgen / eager "
          "| step: eager ms | kgen ms | kgen / eager | error vs fp64: eager / kgen |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cols = {"sync": [], "queued": [], "step": []}
    for ref in refs:
        ref = Path(ref)
        try:
            ms, errors, dtype, training = measure(ref, Path(out_dir) / ref.name, queued=True)
        except Exception as e:   # (a file that fails is a row that says so, not a lost table)
            print(f"| {ref.name} | failed: {type(e).__name__}: {str(e)[:200]} |")
            continue
        r = {"sync": ms["kgen"] / ms["eager"], "queued": ms["kgen queued"] / ms["eager queued"],
             "step": ms["kgen step"] / ms["eager step"]}
        for k, v in r.items():
            cols[k].append(v)
        rows = load(str(ref))["get_inputs"]()[0].shape[0]
        print(f"| {ref.name} | {rows} | {ms['eager']:.3f} | {ms['kgen']:.3f} | {r['sync']:.3f} | {ms['eager queued']:.3f} | "
              f"{ms['kgen queued']:.3f} | {r['queued']:.3f} | {ms['eager step']:.3f} | {ms['kgen step']:.3f} | "
              f"{r['step']:.3f} | {errors[0]:.2e} / {errors[1]:.2e} |", flush=True)
        torch.cuda.empty_cache()
    print(f"{len(cols['sync'])} of {len(refs)} files; median kgen / eager autocast: inference {statistics.median(cols['sync']):.3f} "
          f"(queued {statistics.median(cols['queued']):.3f}), training step {statistics.median(cols['step']):.3f}; below 1.0x: "
          f"{sum(v < 1 for v in cols['sync'])}, {sum(v < 1 for v in cols['queued'])} and {sum(v < 1 for v in cols['step'])}")


if __name__ == "__main__":
    main(*sys.argv[1:])
