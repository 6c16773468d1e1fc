# Session 31, call A: the GPU check of session 30's final code (a7e471b: the generated epilogue
# applied as the tile is stored where no statistics are taken), including the new odd-width test,
# then KernelBench's eval at bf16 on all 36 files (the family's median at this code). The GPU
# tests run while the 36 files are generated and built (CPU), to fit one call.
. scripts/device_setup.sh
t "gpu tests (background)"
(timeout 330 python3 -m pytest -m gpu -q -rfEx tests/test_refs_gpu.py tests/test_skinny_gpu.py > $OUT/gpu_tests.log 2>&1; echo "pytest rc=$?" >> $OUT/gpu_tests.log) &
tests=$!
PRECISIONS=bf16 EVAL_LIMIT=1 bash scripts/device_kernelbench.sh > $OUT/prebuild.log 2>&1   # generate + build only
t "prebuilt"; grep -i "fail\|^---" $OUT/prebuild.log | head
wait $tests; t "gpu tests done"; tail -8 $OUT/gpu_tests.log
PRECISIONS=bf16 EVAL_LIMIT=300 bash scripts/device_kernelbench.sh
