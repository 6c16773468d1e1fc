"""Session 22: each KernelBench file's fp16x3 file (k<N>_wreg.py: w split in the GEMM's registers
at batches up to spec.FP16X3_W_IN_REGISTERS_MAX_ROWS, KGEN_F16X3_W_IN_REGISTERS in
kernels/gemm_wgmma_f16x3.cuh), the same file with w split by the pass before the GEMM at every
batch (k<N>_split.py: the macro defined 0, session 21's kernel), and its tf32x3 file
(k<N>_tf32x3.py), into OUT/, for docs/experiments/device_session22_wreg.sh. (The session's first
two calls ran the kernel's earlier forms, w in registers at every batch; the second also wrote
k<N>_group.py with KGEN_F16X3_WREG_ONE_GROUP 1, a k-tile's twelve products in one wgmma group,
which is the kernel since, the macro gone.)

    python docs/experiments/s22/wreg_files.py OUT KB_LEVEL2_DIR N [N ...]
"""
import subprocess
import sys
from pathlib import Path

MARK = "_KGEN_CUDA_SOURCE = r'''\n"

out, level2, *nums = sys.argv[1:]
Path(out).mkdir(parents=True, exist_ok=True)
for n in nums:
    ref = next(Path(level2).glob(f"{n}_*.py"))
    for math in ("fp16x3", "tf32x3"):
        name = Path(out) / f"k{n}_{'wreg' if math == 'fp16x3' else math}.py"
        subprocess.run(["kgen", "generate", str(ref), "--math", math, "-o", str(name), "--force"], check=True,
                       stdout=subprocess.DEVNULL)
    text = (Path(out) / f"k{n}_wreg.py").read_text()
    assert text.count(MARK) == 1
    (Path(out) / f"k{n}_split.py").write_text(text.replace(MARK, MARK + "#define KGEN_F16X3_W_IN_REGISTERS 0\n"))
    print(n, ref.name)
