"""Session 9: where one candidate build's time goes (`python -m kgen.tune.worker build FILE` is
these steps in one process): the imports, executing the emitted file, CUDA's start, and
load_inline (ninja's own log then splits the compile and the link).

    TORCH_EXTENSIONS_DIR=... python3 build_phases.py FILE
"""
import glob
import os
import sys
import time

t0 = time.monotonic()
import torch  # noqa: E402

t1 = time.monotonic()
from kgen.check.loading import EmittedFile  # noqa: E402

t2 = time.monotonic()
f = EmittedFile(sys.argv[1])
module = f.module
t3 = time.monotonic()
torch.cuda.init()
torch.cuda.get_device_capability()
t4 = time.monotonic()
f.build()
t5 = time.monotonic()
print(f"import torch {t1 - t0:.2f} s, import kgen {t2 - t1:.2f} s, the emitted file {t3 - t2:.2f} s, "
      f"CUDA init {t4 - t3:.2f} s, load_inline {t5 - t4:.2f} s")
for log in glob.glob(os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", ""), "*", ".ninja_log")):
    for line in open(log):
        if not line.startswith("#"):
            start, end, _, target, _ = line.split("\t")
            print(f"  ninja: {target} {(int(end) - int(start)) / 1000:.2f} s (from {int(start) / 1000:.2f} s)")
