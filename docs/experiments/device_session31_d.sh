# Session 31, call D (issue 24): KernelBench's eval at fp16 on all 36 files at this code (session
# 30's epilogue as the tile is stored: not yet evaluated in fp16 on every file), with the GPU
# tests of the 16-bit path (tests/test_half_gpu.py) and the odd-width test in its corrected form
# (KernelBench's bf16 replay judged against eager bf16's own error) run while the 36 files build.
. scripts/device_setup.sh
t "gpu tests (background)"
(timeout 330 python3 -m pytest -m gpu -q -rfEx tests/test_half_gpu.py "tests/test_refs_gpu.py::test_an_odd_width_stores_one_value_at_a_time" > $OUT/gpu_tests.log 2>&1; echo "pytest rc=$?" >> $OUT/gpu_tests.log) &
tests=$!
PRECISIONS=fp16 EVAL_LIMIT=1 bash scripts/device_kernelbench.sh > $OUT/prebuild.log 2>&1   # generate + build only
t "prebuilt"; grep -i "fail" $OUT/prebuild.log | head
wait $tests; t "gpu tests done"; tail -8 $OUT/gpu_tests.log
PRECISIONS=fp16 EVAL_LIMIT=240 bash scripts/device_kernelbench.sh
