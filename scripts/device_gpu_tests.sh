# GPU tests in one device call (log under $OUT): TESTS (pytest paths), K (an optional -k
# expression), LIMIT (seconds). KernelBench's eval is importable when .kb/ is carried.
. scripts/device_setup.sh
t "pytest -m gpu $TESTS ${K:+-k \"$K\"}"
timeout ${LIMIT:-540} python3 -m pytest -m gpu -q -rfEx --durations=5 $TESTS ${K:+-k "$K"} > $OUT/${LOG:-gpu_tests}.log 2>&1
tail -25 $OUT/${LOG:-gpu_tests}.log | cut -c1-300
t done
