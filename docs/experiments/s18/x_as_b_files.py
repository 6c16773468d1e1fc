"""Session 18: each KernelBench file's default kgen file with and without x as the tf32x3
GEMM's shared-memory operand (KGEN_WS_X_AS_B, kernels/gemm_wgmma_ws.cuh), into OUT/
(k<N>_base.py: the roles before, k<N>_swap.py: x as B), for
docs/experiments/device_session18_xasb.sh. Written when the macro's default was 0; with the
default 1 (since), the base file defines it 0.

    python docs/experiments/s18/x_as_b_files.py OUT KB_LEVEL2_DIR N [N ...]
"""
import subprocess
import sys
from pathlib import Path

MARK = "_KGEN_CUDA_SOURCE = r'''\n"

out, level2, *nums = sys.argv[1:]
Path(out).mkdir(parents=True, exist_ok=True)
for n in nums:
    ref = next(Path(level2).glob(f"{n}_*.py"))
    base = Path(out) / f"k{n}_base.py"
    subprocess.run(["kgen", "generate", str(ref), "-o", str(base), "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    text = base.read_text()
    assert text.count(MARK) == 1
    base.write_text(text.replace(MARK, MARK + "#define KGEN_WS_X_AS_B 0\n"))
    (Path(out) / f"k{n}_swap.py").write_text(text)
    print(n, ref.name)
