# Session 6 (H100): the full gate of Linear -> BatchNorm -> GELU -> ReLU at 7, 16 rows (the GEMM
# for a few rows) and 17 (the wgmma GEMM), to tell a fault of the few-rows GEMM from the
# training check's BatchNorm at a tiny batch; then bench of 12 and 84 at 2 / 7 / 16 rows again.
. scripts/device_setup.sh
python3 - > $OUT/bn_rows.log 2>&1 <<'PY'
from pathlib import Path
import torch
from kgen.check.loading import EmittedFile
from kgen.check.validate import validate
from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile
spec = Spec.of("tests/refs/gemm_bn_gelu_relu.py", 16, 4096, 4096, math="tf32x3", backend="wgmma", fusion=2,
               tile=Tile(128, 128, 32, 16, 128, stages=4))
f = EmittedFile(generator.write(spec, Path("/tmp/bn_rows.py")))
f.build()
for batch in (7, 16, 17, 9, 33):
    for r in validate(f, tol=1e-4, batch=batch):
        if not r.passed or "training" in r.name or "gradient" in r.name:
            print(batch, r.line()[:3000], flush=True)
PY
cat $OUT/bn_rows.log | cut -c1-700
