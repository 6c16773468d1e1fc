"""KernelBench's eval of REF against NEW under a harness's torch defaults (MODE): 'plain' as
KernelBench runs it; 'default_device', after torch.set_default_device("cuda"); 'device_ctx',
inside `with torch.device("cuda"):`. Prints the result, each stage's seconds, the peak host RSS
and GPU memory, so that a harness's failure at construction can be told from a limit.

    python3 harness_variants.py MODE REF NEW [fp32|bf16|fp16]
"""
import contextlib
import resource
import sys
import time

import torch
from kernelbench import eval as kb

mode, ref, new = sys.argv[1:4]
precision = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[4] if len(sys.argv) > 4 else "fp32"]
if mode == "default_device":
    torch.set_default_device("cuda")
context = torch.device("cuda") if mode == "device_ctx" else contextlib.nullcontext()
start = time.time()
with context:
    r = kb.eval_kernel_against_ref(open(ref).read(), open(new).read(), seed_num=42, num_correct_trials=5,
                                   num_perf_trials=20, measure_performance=True, timing_method="cuda_event",
                                   build_dir="/tmp/kb_build", precision=precision)
took = time.time() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
gpu = torch.cuda.max_memory_allocated() / 2**30
meta = {k: str(v)[:300] for k, v in (r.metadata if r else {}).items()}
print(f"{mode} {ref.split('/')[-1]} {sys.argv[4] if len(sys.argv) > 4 else 'fp32'}: compiled={r and r.compiled} "
      f"correct={r and r.correctness} runtime={r and r.runtime} ref={r and r.ref_runtime} "
      f"wall {took:.1f}s peak rss {rss:.1f} GiB gpu {gpu:.1f} GiB meta {meta}")
