"""Full `kgen validate` (every check's line) of tests/refs/gemm_sigmoid_gemm_lse.py at BATCH rows,
for each math given (default: tf32x3 and fp16x3), on the GPU.

    PYTHONPATH=. python docs/experiments/s23/validate_chained.py BATCH [MATH ...]"""
import sys, tempfile, time
from pathlib import Path
from click.testing import CliRunner
from kgen.cli import main
from kgen.check.loading import EmittedFile
from kgen.check.validate import validate

batch = sys.argv[1]
for math in sys.argv[2:] or ["tf32x3", "fp16x3"]:
    d = Path(tempfile.mkdtemp())
    out = d / f"chained_{math}.py"
    r = CliRunner().invoke(main, ["generate", "tests/refs/gemm_sigmoid_gemm_lse.py", "--math", math, "--batch", batch,
                                  "-o", str(out), "--results-dir", str(d / "results")])
    print(math, "generate exit", r.exit_code, r.output[-300:] if r.exit_code else "", flush=True)
    t0 = time.time()
    for x in validate(EmittedFile(out), tol=1e-4):
        print(f"  {math}: {x.line()}", flush=True)
    print(f"  {math}: {time.time() - t0:.0f} s", flush=True)
