# Session 43, call E: the autocast table of KernelBench's 36 published files (s43/autocast_table.py:
# bf16 autocast, training mode, inference and a training step, eager autocast against the file
# `kgen generate` writes, built for bf16 autocast, in one process).
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
t "build"
python3 - <<'PY' > $OUT/e_builds.log 2>&1
from pathlib import Path
from kgen.check.loading import EmittedFile
from kgen.tune.search import Candidate, build_all
c = [Candidate(EmittedFile(p).spec, p) for p in sorted(Path("/tmp/kb").glob("*.py"))]
build_all(c, 16, 600, print, dtype="bf16", autocast=True)
PY
grep -iE "error|fail" $OUT/e_builds.log | head -5
t "table"
timeout 330 python3 docs/experiments/s43/autocast_table.py /tmp/kb $(ls .kb/level2/*.py) > $OUT/e_table.md 2> $OUT/e_table.err
tail -3 $OUT/e_table.md; tail -3 $OUT/e_table.err
t "end"
