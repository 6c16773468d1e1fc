# Session 46, call G: the fp32 weight's row limit at 1024 (2048-row files convert again): the
# autocast table (s46/autocast_table.py) of the 2048-row files 51 and 53, beside 12 (1024 rows)
# and 59 (128), all in one run.
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/kb
files=$(ls .kb/level2/{12,51,53,59}_*.py)
python3 - $files <<'PY'
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
python3 - <<'PY' > $OUT/g_builds.log 2>&1
from pathlib import Path
from kgen.check.loading import EmittedFile
from kgen.tune.search import Candidate, build_all
c = [Candidate(EmittedFile(p).spec, p) for p in sorted(Path("/tmp/kb").glob("*.py"))]
build_all(c, 16, 600, print, dtype="bf16", autocast=True, fp32_weight=True)
build_all(c, 16, 600, print, dtype="bf16", autocast=True)
PY
grep -iE "error|fail" $OUT/g_builds.log | head -5
t "table"
timeout 150 python3 docs/experiments/s46/autocast_table.py /tmp/kb $files > $OUT/g_table.md 2> $OUT/g_table.err
cat $OUT/g_table.md | cut -c1-200; tail -3 $OUT/g_table.err
t "end"
