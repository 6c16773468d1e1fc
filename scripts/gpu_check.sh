#!/usr/bin/env bash
# (A record: the selftests predate the kernels' current epilogue interface and no longer build;
# docs/perf.md's early GEMM measurements came from them.)
# One device session's worth of checks, for the lent GPU machine (see docs/perf.md for results):
# install kgen and run the standalone GEMM selftests named in SELFTESTS (any of: simt mma wgmma;
# tests/cuda/<name>_selftest.cu). Logs go to $OUT. The GPU test tier: python -m pytest -m gpu.
set -uo pipefail
OUT=${OUT:-/tmp/kgen_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-4}
pip install -q -e . --no-deps --no-build-isolation >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for t in ${SELFTESTS:-}; do
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a "tests/cuda/${t}_selftest.cu" -o "/tmp/${t}_selftest" \
    && "/tmp/${t}_selftest" ${SELFTEST_ARGS:-} 2>&1 | tee "$OUT/${t}_selftest.log" | tail -40
done
