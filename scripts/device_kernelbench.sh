# KernelBench's own eval on kgen's files for KernelBench's published level-2 GEMM files, in one
# device call (logs under $OUT). Needs KernelBench's folder copied to .kb/ (ignored; name it in
# the call's carry): `cp -r ../shared/kernelbench .kb`. PART selects the files (a glob on their
# numbers' first digit, default all); GPU_TESTS, if set, are run first with pytest -m gpu;
# PRECISIONS (default fp32) the KernelBench precisions to evaluate at, one after the other;
# KB_FLAGS extra flags of scripts/kernelbench_corpus.py (--compile, --autotune). Each precision
# gets the file `kgen generate FILE --dtype PRECISION` writes (with GEN_FLAGS, e.g. "--math fp16x3").
# GPUS (default 1): the eval's files dealt out over that many GPUs, one process each (a host of
# several: max-autotune's compiles of 36 files do not fit one GPU's call), the table merged after.
. scripts/device_setup.sh
# NUMS (e.g. "33 41 97"): those files only, instead of PART's glob. REFS (default .kb/level2): the
# folder the reference files are read from (KernelBench's files rewritten at other shapes, say).
refs_dir=${REFS:-.kb/level2}
refs=$(if [ -n "${NUMS:-}" ]; then for n in $NUMS; do ls $refs_dir/${n}_*.py; done; else ls $refs_dir/${PART:-}*.py; fi)
label=$(printf %s "${NUMS:-${PART:-all}}" | tr -c 'A-Za-z0-9' '_')   # $OUT takes plain file names only
if [ -n "${GPU_TESTS:-}" ]; then
  t "gpu tests: $GPU_TESTS"
  gpu_tests gpu_tests.log ${GPU_TESTS_LIMIT:-240} $GPU_TESTS
fi
for precision in ${PRECISIONS:-fp32}; do
  t "generate (kgen generate FILE --dtype $precision: the default variant for this GPU and dtype)"
  files=/tmp/kbf_$precision
  mkdir -p $files
  python3 - $precision $files $refs <<'PY' > $OUT/chosen_$precision.log
import sys
from pathlib import Path
from click.testing import CliRunner
from kgen.cli import main
precision, files = sys.argv[1:3]
import os
extra = os.environ.get("GEN_FLAGS", "").split()
for ref in sys.argv[3:]:   # one process: torch is imported once
    r = CliRunner().invoke(main, ["generate", ref, "--dtype", precision, "-o", f"{files}/{Path(ref).name}", "--force", *extra])
    said = [l for l in r.output.splitlines() if l.startswith(("chose", "wrote"))]
    print(Path(ref).name, r.exit_code, said[0][:200] if r.exit_code == 0 and said else r.output[-300:])
PY
  grep -v " 0 " $OUT/chosen_$precision.log || true
  t "build ($precision)"
  for r in $refs; do
    (timeout 300 python3 -m kgen.tune.worker build --dtype $precision $files/$(basename $r) > /dev/null 2>&1 || echo "build failed: $r $precision") &
  done; wait
  t "KernelBench eval at $precision, kgen's replay against fp64 (fp32), bench"
  gpus=${GPUS:-1}
  for g in $(seq 0 $((gpus - 1))); do
    share=$(printf '%s\n' $refs | awk -v g=$g -v n=$gpus '(NR - 1) % n == g')
    [ -n "$share" ] || continue
    suffix=$([ $gpus -gt 1 ] && echo "_gpu$g")
    CUDA_VISIBLE_DEVICES=$([ $gpus -gt 1 ] && echo $g || echo "${CUDA_VISIBLE_DEVICES:-0}") \
      timeout ${EVAL_LIMIT:-420} python3 scripts/kernelbench_corpus.py --kb .kb --files $files --precision $precision \
      ${KB_FLAGS:-} --json $OUT/kb_${label}_$precision$suffix.jsonl $share > $OUT/kb_${label}_$precision$suffix.log 2>&1 &
  done; wait
  records=$(ls $OUT/kb_${label}_${precision}*.jsonl 2>/dev/null)
  [ -n "$records" ] && python3 scripts/kernelbench_corpus.py --merge $records --precision $precision \
    | tee $OUT/kb_${label}_${precision}_table.md | grep -E "^\||correct under"
done
if [ -n "${THEN:-}" ]; then t "then: $THEN"; bash -c "$THEN"; fi
t done
