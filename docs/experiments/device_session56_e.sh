# Session 56, call E: fp32 files whose K is off TMA's 16-byte rows now pad x and w with zeros and
# run the TMA GEMM (split-K where few tiles) instead of the scalar-load fallback (84 us against
# cuBLAS's 27 at 300 x 1337 -> 260 in call D). KernelBench's eval at fp32 on call C's K = 1337
# files, then the GPU tests of ragged K (test_gpu's ragged features, keep_z's 257 -> 77).
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > $OUT/shapes.txt
REFS=/tmp/kb_odd NUMS="14 33 45 59 68 81 95" PRECISIONS=fp32 EVAL_LIMIT=150 bash scripts/device_kernelbench.sh
. scripts/device_setup.sh > /dev/null
t "gpu tests"
gpu_tests gpu_tests.log 280 tests/test_gpu.py tests/test_keep_z_gpu.py -k "ragged"
t done
