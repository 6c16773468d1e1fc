"""Session 59: KernelBench's 36 files, each respelled by a seeded combination of 3-6 of
tests/kernelbench_respell.py's axes at a moderate shape, written as files KernelBench's eval can
run (scripts/device_kernelbench.sh REFS=OUT): the promise end to end on modules spelled as others
write them. Usage: PYTHONPATH=.:tests python docs/experiments/s59/respelled_corpus.py KB_LEVEL2 OUT"""

import random
import sys
from pathlib import Path

import torch

import kernelbench_respell as R
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace

SHAPE = {"batch": 256, "in_features": 1024, "out_features": 1024}

level2, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
axes = sorted(R.AXES)
for path in sorted(level2.glob("*.py")):
    number = path.name.split("_")[0]
    small = R.shrink(path.read_text(), Reference(str(path), SHAPE).set_constants)
    rng = random.Random(f"59 corpus {number}")
    for attempt in range(20):   # (a combination none of whose axes applies is drawn again)
        chosen = rng.sample(axes, rng.randint(3, 6))
        try:
            text, keys, applied = R.respell(small, chosen, seed=attempt)
        except R.NotApplicable:
            continue
        if not applied:
            continue
        # (drawn again where kgen refuses the respelling, `(W @ x.T).T`, or the generator's own
        # miss breaks the module: the known refusal is tests/test_kernelbench_respelled.py's)
        (out / path.name).write_text(f"# {path.name} respelled: {', '.join(applied)}\n" + text)
        try:
            trace(Reference(str(out / path.name)))
            break
        except Exception as e:
            print(path.name, applied, "redrawn:", str(e)[:120])
    print(path.name, applied)
