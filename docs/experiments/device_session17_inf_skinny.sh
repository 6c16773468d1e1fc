# Session 17 (H100): (1) the inf-safe tf32x3 split (mma_detail::small_part): KernelBench 33 and 56,
# files of HEAD before the change (scratch_s17/old) against the change (scratch_s17/new),
# interleaved with eager; the where GPU test that failed on an infinite input, the split-K and
# few-rows GPU tests, then the GPU tier's refs (every module's full gate, the Inf check now
# strict); (2) the few-rows GEMM's variants at batch 7 (docs/experiments/s17/skinny_variants.py),
# each timed as kgen bench times and by its kernels' GPU time.
. scripts/device_setup.sh
python3 docs/experiments/s17/skinny_variants.py scratch_s17/new/kb12.py /tmp/sk > /dev/null
build() { python3 -m kgen.tune.worker build "$1" > /dev/null 2>&1; }
for f in scratch_s17/old/kb33.py scratch_s17/new/kb33.py scratch_s17/old/kb56.py scratch_s17/new/kb56.py /tmp/sk/*.py; do build $f & done; wait
t "built"
for n in 33 56; do
  python3 scripts/compare_forward.py .kb/level2/${n}_*.py scratch_s17/old/kb$n.py scratch_s17/new/kb$n.py > $OUT/compare_$n.log 2>&1; cat $OUT/compare_$n.log
done
t "few rows"
for b in 7 2; do
  python3 docs/experiments/s17/few_rows.py .kb/level2/12_*.py $b /tmp/sk/kb12_*.py > $OUT/few_rows_b$b.log 2>&1; cat $OUT/few_rows_b$b.log
done
t "GPU tests"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_where.py tests/test_split_k_gpu.py tests/test_skinny_gpu.py > $OUT/tests.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/tests.log | cut -c1-300 | tail -12
t "refs"
timeout ${REFS_LIMIT:-200} python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_refs_gpu.py > $OUT/refs.log 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED" $OUT/refs.log | cut -c1-300 | tail -12
t done
