"""Session 44: KernelBench files' default kgen file (fp16x3 at their shapes) with x's k permuted
for the GEMM with w in registers (KGEN_F16X3_PERMUTE_K 1, the default: k<N>_fp32_perm.py) and in
k's order (0: k<N>_fp32_order.py), into OUT/, for docs/experiments/device_session44_d.sh.

    python docs/experiments/s44/f16x3_permute_files.py OUT KB_LEVEL2_DIR N [N ...]
"""
import subprocess
import sys
from pathlib import Path

MARK = "_KGEN_CUDA_SOURCE = r'''\n"

out, level2, *nums = sys.argv[1:]
Path(out).mkdir(parents=True, exist_ok=True)
for n in nums:
    ref = next(Path(level2).glob(f"{n}_*.py"))
    perm = Path(out) / f"k{n}_fp32_perm.py"
    subprocess.run(["kgen", "generate", str(ref), "--math", "fp16x3", "-o", str(perm), "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    text = perm.read_text()
    assert text.count(MARK) == 1
    (Path(out) / f"k{n}_fp32_order.py").write_text(text.replace(MARK, MARK + "#define KGEN_F16X3_PERMUTE_K 0\n"))
    print(n, ref.name)
