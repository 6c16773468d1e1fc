"""KernelBench's 36 level-2 GEMM files at shapes other than the published ones (session 56; tests/
test_kernelbench_corpus.py generates each, docs/experiments/device_session56_c.sh evaluates them).

    python scripts/kernelbench_shapes.py KB_LEVEL2_DIR OUT_DIR

Writes each file to OUT_DIR with its module-level size constants (batch_size; in_features /
input_size; out_features / hidden_size / output_size) set to one of five odd shapes, cycling over
the files in name order: batch 3 to 2051 rows, K and N not multiples of 8 where the module allows
(N a multiple of num_groups and of a pool's kernel, as the module needs). Only those numbers
change; the text is otherwise the published file's. A user's module is seldom at KernelBench's
shape: this runs the same files through kgen generate and KernelBench's eval at other tiles'
edges (partial tiles in M, N and K, split-K at few rows, the row kernels' tails)."""

import math
import re
import sys
from pathlib import Path

# (batch, K, N) per file, in turn.
SHAPES = [(67, 1000, 515), (7, 300, 1031), (300, 1337, 260), (2051, 520, 777), (3, 4100, 333)]
BATCH = ("batch_size",)
IN = ("in_features", "input_size")
OUT = ("out_features", "hidden_size", "output_size")
MULTIPLE_OF = ("num_groups", "kernel_size", "pool_kernel_size")


def constants(text):
    return {m[1]: m[2] for m in re.finditer(r"^([a-z_]+)\s*=\s*([0-9]+)\s*$", text, re.M)}


def resize(text, shape):
    batch, k, n = shape
    found = constants(text)
    step = math.lcm(*(int(found[name]) for name in MULTIPLE_OF if name in found))
    n = max(step, n // step * step + (step if n % step else 0)) if step > 1 else n
    sizes = {**{b: batch for b in BATCH}, **{i: k for i in IN}}
    outs = [o for o in OUT if o in found]
    # Two output sizes (45: hidden_size then output_size): the second GEMM's N a little apart.
    for j, name in enumerate(outs):
        sizes[name] = n + 14 * j
    def one(m):
        name = m[1]
        return f"{name} = {sizes[name]}" if name in sizes else m[0]
    return re.sub(r"^([a-z_]+)\s*=\s*([0-9]+)[ \t]*$", one, text, flags=re.M), (batch, k, n)


def main():
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for i, ref in enumerate(sorted(src.glob("*.py"), key=lambda p: int(p.name.split("_")[0]))):
        text, shape = resize(ref.read_text(), SHAPES[i % len(SHAPES)])
        (out / ref.name).write_text(text)
        print(ref.name, "batch %d, K %d, N %d" % shape)


if __name__ == "__main__":
    main()
