# Session 17 (H100), second form of the inf-safe tf32x3 split (big clamped to the largest tf32
# number: mma_detail::split_tf32), and the few-rows GEMM with two k-blocks ahead and the L2
# 256-byte prefetch (gemm_skinny.cuh): HEAD's files (scratch_s17/old) against this tree's
# (scratch_s17/new), interleaved with eager; then the GPU tests of both, and the GPU tier's refs.
. scripts/device_setup.sh
build() { python3 -m kgen.tune.worker build "$1" > /dev/null 2>&1; }
for f in scratch_s17/old/*.py scratch_s17/new/*.py; do build $f & done; wait
t "built"
for n in 33 56; do
  python3 scripts/compare_forward.py .kb/level2/${n}_*.py scratch_s17/old/kb$n.py scratch_s17/new/kb$n.py > $OUT/compare_$n.log 2>&1; cat $OUT/compare_$n.log
done
t "few rows"
for n in 12 30; do for b in 7 16; do
  python3 docs/experiments/s17/few_rows.py .kb/level2/${n}_*.py $b scratch_s17/old/kb$n.py scratch_s17/new/kb$n.py 2>&1 | grep -v -i "warn" > $OUT/few_rows_${n}_b$b.log; cat $OUT/few_rows_${n}_b$b.log
done; done
t "GPU tests"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_where.py tests/test_split_k_gpu.py tests/test_skinny_gpu.py > $OUT/tests.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/tests.log | cut -c1-300 | tail -12
t "refs"
timeout ${REFS_LIMIT:-300} python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_refs_gpu.py -v > $OUT/refs.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/refs.log | cut -c1-300 | tail -12; grep -c PASSED $OUT/refs.log
t done
