# Session 23: `kgen search --top 1` of KernelBench 56 (its committed record was session 8's
# tf32x3 winner; session 22's search ended "no candidate passed", its training check out of the
# H100's memory), then the 16-bit GPU tests session 23's first call did not reach.
. scripts/device_setup.sh
mkdir -p $OUT/results
t "search 56"
timeout 300 kgen search .kb/level2/56_Matmul_Sigmoid_Sum.py --tol 1e-4 --top 1 --out-dir /tmp/s23/gen > $OUT/search_56.log 2>&1
tail -5 $OUT/search_56.log | cut -c1-240
cp results/search_56_*.json results/search_56_*.png $OUT/results/ 2>/dev/null
t "16-bit tests"
timeout ${HALF_LIMIT:-250} python3 -m pytest -m gpu -v -rfE --tb=short -n 4 tests/test_half_gpu.py tests/test_gpu.py -k "bf16 or fp16 or half" > $OUT/s23_half_tests.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/s23_half_tests.log | cut -c1-300 | tail -8
t done
