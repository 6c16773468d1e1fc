# GPU tests in one device call (log under $OUT): TESTS (pytest paths), K (an optional -k
# expression), LIMIT (seconds). KernelBench's eval is importable when .kb/ is carried.
. scripts/device_setup.sh
t "pytest -m gpu $TESTS ${K:+-k \"$K\"}"
# -v: a line per test as it ends (with pytest-xdist too), so that a run the limit cuts still
# says which tests passed.
timeout ${LIMIT:-540} python3 -m pytest -m gpu -v -rfEx --durations=5 $TESTS ${K:+-k "$K"} > $OUT/${LOG:-gpu_tests}.log 2>&1
grep -E '(FAILED|ERROR) ' $OUT/${LOG:-gpu_tests}.log | cut -c1-300 | head -40
tail -12 $OUT/${LOG:-gpu_tests}.log | cut -c1-300
t done
