# Sourced by the device scripts (each runs in the repository root on the device machine):
# installs kgen into the device image's Python, names the GPU, puts the tree (and KernelBench's
# wheels, where .kb/ is carried) on PYTHONPATH, and
# defines t, which prints a line stamped with the seconds since the script began, gpu_tests and
# build_files.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=.
# KernelBench's eval, where its folder was copied to .kb/ and carried: its wheels (pydantic).
if [ -d .kb/wheels ]; then
  python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .kb/wheels/*.whl 2>&1 | grep -v WARNING | tail -1
  export PYTHONPATH=.:/tmp/site
fi
start=$(date +%s)
t() { echo "--- t=$(( $(date +%s) - start ))s: $*"; }
# gpu_tests LOG LIMIT PYTEST_ARGS...: pytest -m gpu within LIMIT seconds, one line per test in
# $OUT/LOG (so a run its limit cuts short still says which tests passed), and a summary here. Failures
# are counted in both of pytest's -v formats: `tests/x.py::t FAILED [ 5%]` and, under -n (xdist),
# `[gw3] [ 5%] FAILED tests/x.py::t` (session 62 counted only the first and reported 0 failed).
gpu_tests() {
  local log=$OUT/$1 limit=$2; shift 2
  timeout $limit python3 -m pytest -m gpu -v -rfE "$@" > $log 2>&1
  local rc=$?
  echo "gpu tests (exit $rc$([ $rc = 124 ] && echo ': cut at the limit')): $(grep -c ' PASSED' $log) passed, $(grep -c ' SKIPPED' $log) skipped, $(grep -cE ' (FAILED|ERROR) +\[ *[0-9]+%\] *$|^\[gw[0-9]+\] \[ *[0-9]+%\] (FAILED|ERROR) ' $log) failed"
  grep -E '^FAILED|^ERROR' $log | cut -c1-300 | head
}
# build_files DIR LOG: builds every emitted file in DIR at once (an A/B's files; each build its own
# process), in fp32 where the file's name says fp32, else in its 16-bit dtype (fp16 where the name
# says so, else bf16), its output in $OUT/LOG; prints any error line.
build_files() {
  (for f in $1/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
name = sys.argv[1]
dtype = torch.float32 if 'fp32' in name else torch.float16 if 'fp16' in name else torch.bfloat16
EmittedFile(name).build(dtype)" $f & done; wait) > $OUT/$2 2>&1
  grep -iE "error" $OUT/$2 | head -5
}
