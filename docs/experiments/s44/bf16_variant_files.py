"""Session 44: a KernelBench file's wgmma bf16 GEMM (kernels/gemm_wgmma_round16.cuh) with each of its
A/B macros, into OUT/ (k<N>_fp32_g<G>r<R>.py: KGEN_ROUND16_GROUP_STEPS = G, KGEN_ROUND16_SETMAXNREG = R),
for docs/experiments/device_session44_b.sh.

    python docs/experiments/s44/bf16_variant_files.py OUT KB_LEVEL2_DIR N [N ...]
"""
import subprocess
import sys
from pathlib import Path

MARK = "_KGEN_CUDA_SOURCE = r'''\n"
VARIANTS = [(1, 0), (1, 1), (2, 1)]

out, level2, *nums = sys.argv[1:]
Path(out).mkdir(parents=True, exist_ok=True)
for n in nums:
    ref = next(Path(level2).glob(f"{n}_*.py"))
    base = Path(out) / f"k{n}_base.py"
    subprocess.run(["kgen", "generate", str(ref), "--backend", "wgmma", "--math", "bf16", "-o", str(base), "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    text = base.read_text()
    base.unlink()
    assert text.count(MARK) == 1
    for g, r in VARIANTS:
        defines = f"#define KGEN_ROUND16_GROUP_STEPS {g}\n#define KGEN_ROUND16_SETMAXNREG {r}\n"
        (Path(out) / f"k{n}_fp32_g{g}r{r}.py").write_text(text.replace(MARK, MARK + defines))
    print(n, ref.name)
