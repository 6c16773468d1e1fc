# Session 6 (H100): the GEMM for a few rows (kernels/gemm_skinny.cuh), and BatchNorm's mean of a
# column holding an infinite value (NaN, as torch's Welford statistics give).
#  1. tests/test_skinny_gpu.py (fp32-exact at 2/7/16 rows, the full gate at 7, bf16, bit-for-bit
#     repeatable, the kernel runs at <= 16 rows and not at 17), then the BatchNorm modules of
#     tests/test_refs_gpu.py and tests/test_half_gpu.py (the finalize change).
#  2. kgen bench at batches 2, 7, 16, 17 (17: the wgmma path) of the files kgen generate gives for
#     KernelBench 12, 30 and 84 (fp32), and 12 in bf16.
. scripts/device_setup.sh
mkdir -p /tmp/g
for n in 12 30 84; do python3 -m kgen.cli generate .kb/level2/${n}_*.py -o /tmp/g/$n.py > /dev/null 2>&1 & done
wait
( for n in 12 30 84; do python3 -c "
from kgen.check.loading import EmittedFile; import torch
f = EmittedFile('/tmp/g/$n.py'); f.build(); f.build(torch.bfloat16) if '$n' == '12' else None" ; done ) > $OUT/prebuild.log 2>&1 &
t "test_skinny_gpu"
timeout ${TEST_LIMIT:-200} python3 -m pytest -q -m gpu tests/test_skinny_gpu.py -p no:cacheprovider -n 4 -v > $OUT/test_skinny.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED|Error" $OUT/test_skinny.log | cut -c1-300 | tail -15
wait
t "bench at few rows"
for n in 12 30 84; do for b in ${BATCHES:-2 7 16 17}; do
  echo "== $n batch $b fp32"; timeout 60 python3 -m kgen.cli bench /tmp/g/$n.py --batch $b --iters 50 2>&1 | grep -E "ModelNew|eager fp32|error|Error" | head -3
done; done > $OUT/bench_few_rows.log 2>&1
for b in ${BATCHES:-2 7 16 17}; do
  echo "== 12 batch $b bf16"; timeout 60 python3 -m kgen.cli bench /tmp/g/12.py --batch $b --iters 50 --dtype bf16 2>&1 | grep -E "ModelNew|eager|error|Error" | head -3
done >> $OUT/bench_few_rows.log 2>&1
cat $OUT/bench_few_rows.log
if [ -n "$BN_TESTS" ]; then
  t "BatchNorm modules of the GPU tier"
  timeout ${BN_LIMIT:-240} python3 -m pytest -q -m gpu tests/test_refs_gpu.py tests/test_half_gpu.py -k "bn or batchnorm" \
    -p no:cacheprovider -n 4 -v > $OUT/test_bn.log 2>&1
  echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/test_bn.log | cut -c1-300 | tail -12
fi
t done
