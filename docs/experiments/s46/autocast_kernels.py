"""Session 46: where an fp32 module's time goes inside bf16 autocast, per kernel (torch.profiler,
20 inference calls after warm-up): the file's build whose GEMM reads the fp32 weight
(_KGEN_FP32_WEIGHT: the round16 GEMM on 16-bit x), the same file with the weight converted (the
half GEMM, as before session 46: _KGEN_FP32_WEIGHT set False), and the fp32 module's
`--math bf16` file outside autocast (the round16 GEMM on fp32 x).
    python3 docs/experiments/s46/autocast_kernels.py OUTDIR REF.py [REF.py ...]"""
import sys
from pathlib import Path

import torch
from click.testing import CliRunner

from kgen.check.loading import EmittedFile
from kgen.cli import main

out = Path(sys.argv[1])
for ref in sys.argv[2:]:
    name = Path(ref).stem
    paths = {}
    for label, extra in (("default", []), ("bf16", ["--math", "bf16", "--backend", "wgmma"])):
        paths[label] = out / f"{name}_{label}.py"
        r = CliRunner().invoke(main, ["generate", ref, "-o", str(paths[label]), "--force", *extra])
        assert r.exit_code == 0, r.output
    f = EmittedFile(paths["default"])
    fb = EmittedFile(paths["bf16"])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = f.ModelNew(*f.init_args())
        model_b = fb.ModelNew(*fb.init_args())
    x = torch.rand(f.spec.batch, f.spec.in_features, device="cuda")
    cases = []

    def autocast_call(fp32_weight):
        def call():
            f.module._KGEN_FP32_WEIGHT = fp32_weight
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                model(x)
        return call

    def plain_call():
        with torch.no_grad():
            model_b(x)

    for label, call in (("autocast, fp32 weight (round16)", autocast_call(True)),
                        ("autocast, weight converted (half GEMM)", autocast_call(False)),
                        ("fp32 module, --math bf16, no autocast", plain_call)):
        for _ in range(10):
            call()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            call()
        end.record()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                call()
            torch.cuda.synchronize()
        print(f"== {name}: {label}: {start.elapsed_time(end) / 20:.3f} ms a call (back to back)")
        for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:6]:
            print(f"   {e.device_time_total / 20:8.1f} us/call  x{e.count // 20}  {e.key[:150]}")
    f.module._KGEN_FP32_WEIGHT = True
