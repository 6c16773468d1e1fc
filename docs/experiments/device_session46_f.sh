# Session 46, call F: the rule after call C (an fp32 module's weight stays fp32 inside autocast at
# a batch of at most AUTOCAST_FP32_WEIGHT_MAX_ROWS where no gradient of it is wanted; else it is
# converted once, as before): KernelBench's 36 files, each built for bf16 autocast both ways (the
# step's and the inference's), the table with queued inference beside the synchronized calls
# (s46/autocast_table.py); then the GPU tests of the change (test_half_gpu's autocast tests on
# three modules, the compiled inference under autocast).
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
python3 - <<'PY' > $OUT/f_builds.log 2>&1
from pathlib import Path
from kgen.check.loading import EmittedFile
from kgen.tune.search import Candidate, build_all
c = [Candidate(EmittedFile(p).spec, p) for p in sorted(Path("/tmp/kb").glob("*.py"))]
build_all(c, 16, 600, print, dtype="bf16", autocast=True, fp32_weight=True)
build_all(c, 16, 600, print, dtype="bf16", autocast=True)
PY
grep -iE "error|fail" $OUT/f_builds.log | head -5
t "table"
timeout 150 python3 docs/experiments/s46/autocast_table.py /tmp/kb $(ls .kb/level2/*.py) > $OUT/f_table.md 2> $OUT/f_table.err
tail -2 $OUT/f_table.md; tail -3 $OUT/f_table.err
t "tests"
export KGEN_TEST_REFS=gemm_mul_leakyrelu,gemm_bn_gelu_relu,gemm_sigmoid_gemm_lse
left=$(( 470 - ($(date +%s) - start) ))
gpu_tests f_gpu_half_autocast.log $left tests/test_half_gpu.py -k "autocast"
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests f_gpu_compile_autocast.log $left tests/test_custom_ops.py -k "fp32_module_under_autocast"
t "end"
