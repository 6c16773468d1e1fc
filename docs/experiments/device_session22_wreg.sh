# Session 22: fp16x3 with w split in the GEMM's registers, on an H100. Writes each KernelBench
# file's fp16x3 file (w in registers), the same with the split pass over w (session 21's kernel)
# and its tf32x3 file (docs/experiments/s22/wreg_files.py), builds them 16 at a time, times them
# interleaved with eager fp32 in one process per module (scripts/compare_forward.py: error vs
# fp64 beside each), then runs the fp16x3 GPU tests (the full gate, NaN / Inf / magnitudes and
# training included). Needs `cp -r ../shared/kernelbench .kb` and carry [".kb"].
. scripts/device_setup.sh
NUMS=${NUMS:-33 84 39 55 56 59}
python3 docs/experiments/s22/wreg_files.py /tmp/s22 .kb/level2 $NUMS > /dev/null
t "build"
for f in /tmp/s22/*.py; do timeout 300 python3 -m kgen.tune.worker build $f > $OUT/build_$(basename $f .py).log 2>&1 & done; wait
grep -l -i "error" $OUT/build_*.log | head
for n in $NUMS; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 150 python3 scripts/compare_forward.py $ref /tmp/s22/k${n}_tf32x3.py /tmp/s22/k${n}_split.py /tmp/s22/k${n}_wreg.py 2>&1 | tail -6
done
if [ -n "${GPU_TESTS:-1}" ]; then
  t "gpu tests"
  timeout ${TEST_LIMIT:-240} python3 -m pytest -q -m gpu ${TESTS:-tests/test_fp16x3.py tests/test_gpu.py -k fp16x3} -x 2>&1 | tail -15
fi
t done
