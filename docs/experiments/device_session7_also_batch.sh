# Session 7, fourth call (H100): --also-batch with the outlier re-timing (search.RETIME_FACTOR):
# the small module whose ranking one disturbed measurement decided in the third call, then
# KernelBench's BatchNorm (33) and softmax (99) modules searched at 1024 for 128 and 16384 too
# (issue 25: "<= 0.45x eager fp32 at each, GroupNorm, BatchNorm and softmax modules included").
. scripts/device_setup.sh
t "search gemm_mul_leakyrelu 1024 (+128, 7)"
timeout 200 python3 -m kgen.cli search tests/refs/gemm_mul_leakyrelu.py --batch 1024 --in 4096 --out 4096 \
  --also-batch 128 --also-batch 7 --tol 1e-4 --math tf32x3 --top 3 --out-dir /tmp/ab/generated \
  --results-dir /tmp/ab/results > $OUT/also_batch_small.log 2>&1; echo "exit $?"
grep -vE "^  (build|eval) " $OUT/also_batch_small.log | grep -E "batch|fastest valid" | cut -c1-260 | tail -12
for n in ${NUMS:-33 99}; do
  f=$(ls .kb/level2/${n}_*.py)
  t "search $f at 1024 (+128, 16384)"
  timeout ${KB_LIMIT:-270} python3 -m kgen.cli search $f --also-batch 128 --also-batch 16384 --tol 1e-4 --math tf32x3 \
    --top 3 --out-dir /tmp/ab/generated --results-dir /tmp/ab/results > $OUT/also_batch_kb$n.log 2>&1; echo "exit $?"
  grep -vE "^  (build|eval) " $OUT/also_batch_kb$n.log | grep -E "batch|fastest valid|no candidate" | cut -c1-260 | tail -12
done
t done
