# Session 9 (H100): (1) one build's time by phase (s9/build_phases.py); (2) the mechanics of
# `kgen search` of several files spread over GPUs (tune.several) on real hardware, with one GPU
# standing in for two (gpus [0, 0]: two searches at once on one H100, so their times mean
# nothing; what is checked is the subprocesses, the GPU tags, the shared cache and index, the
# records, the table and the exit code). PHASES=0 skips (1).
. scripts/device_setup.sh >/dev/null
W=/tmp/s9s; rm -rf $W; mkdir -p $W
if [ "${PHASES:-1}" = 1 ]; then
t "build phases"
python3 -m kgen.cli generate .kb/level2/12_Gemm_Multiply_LeakyReLU.py -o $W/f12.py > /dev/null
TORCH_EXTENSIONS_DIR=$W/ext_phases python3 docs/experiments/s9/build_phases.py $W/f12.py 2>&1 | tail -8
fi
t "several files, two searches at once on one GPU"
export KGEN_CACHE_DIR=$W/kc TORCH_EXTENSIONS_DIR=$W/ext
timeout 400 python3 - <<'PY' > $OUT/several_mechanics.log 2>&1
from pathlib import Path
from kgen import cli
refs = [".kb/level2/12_Gemm_Multiply_LeakyReLU.py", ".kb/level2/84_Gemm_BatchNorm_Scaling_Softmax.py",
        ".kb/level2/40_Matmul_Scaling_ResidualAdd.py"]
try:
    cli._search_files_on_gpus(refs, [0, 0], 16, tol=(1e-4,), maths=(), iters=30, top=1, exhaustive=False,
                              out_dir=Path("/tmp/s9s/out"), results_dir=Path("/tmp/s9s/res"), vs_compile=False,
                              also_batches=(), dtype=None)
except SystemExit as e:
    print("exit", e.code)
PY
echo "python exit $?"
grep -E "^(===|---)|^file |x eager|with a winner|wall time|ended without|^exit|Traceback|Error" $OUT/several_mechanics.log | cut -c1-200
python3 - <<'PY'
import json, pathlib
idx = json.loads(pathlib.Path("/tmp/s9s/out/index.json").read_text())
print("index.json winners:", sorted(idx["winners"]))
for p in sorted(pathlib.Path("/tmp/s9s/res").glob("*.json")):
    r = json.loads(p.read_text())
    print(p.name, "gpus", r["gpus"], "winner", list(r["winners"]))
cache = json.loads(pathlib.Path("/tmp/s9s/kc/measurements.json").read_text())
print("cache entries", len(cache), "from files:", sorted({k.split("|")[2].split(" ")[0][:40] for k in cache}))
PY
ls /tmp/s9s/out
t done
