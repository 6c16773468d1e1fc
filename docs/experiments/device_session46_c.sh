# Session 46, call C: an fp32 module inside bf16 autocast with its weight left fp32 (the build for
# autocast with KGEN_FP32_WEIGHT: the round16 GEMM rounds w in its registers, no pass converts it).
# KernelBench's 36 files as `kgen generate` writes them, built for an fp32 module in bf16 autocast;
# the autocast table (s43/autocast_table.py, as session 43's call E: inference and a training
# step against eager autocast, interleaved, one process); then the KernelBench autocast GPU test
# (each file's output, gradients and buffers against fp64, eager autocast's error the yardstick).
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/kb
python3 - .kb/level2/*.py <<'PY'
import sys
from pathlib import Path
from click.testing import CliRunner
from kgen.cli import main
for ref in sys.argv[1:]:
    r = CliRunner().invoke(main, ["generate", ref, "-o", f"/tmp/kb/{Path(ref).name}", "--force"])
    if r.exit_code:
        print(ref, r.output[-300:])
PY
grep -l "^_KGEN_FP32_WEIGHT = True" /tmp/kb/*.py | wc -l | sed 's/^/files whose weight stays fp32: /'
t "build"
python3 - <<'PY' > $OUT/c_builds.log 2>&1
from pathlib import Path
from kgen.check.loading import EmittedFile
from kgen.tune.search import Candidate, build_all
c = [Candidate(EmittedFile(p).spec, p) for p in sorted(Path("/tmp/kb").glob("*.py"))]
build_all(c, 16, 600, print, dtype="bf16", autocast=True, fp32_weight=True)
PY
grep -iE "error|fail" $OUT/c_builds.log | head -5
t "table"
timeout 330 python3 docs/experiments/s46/autocast_table.py /tmp/kb $(ls .kb/level2/*.py) > $OUT/c_table.md 2> $OUT/c_table.err
tail -3 $OUT/c_table.md; tail -3 $OUT/c_table.err
t "tests"
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests c_gpu_kb_autocast.log $left tests/test_kernelbench_autocast_gpu.py
t "end"
