# Session 30, call A (issue 24): Nsight Compute on kgen's 16-bit GEMM and eager's cuBLAS GEMM side by
# side at KernelBench 12's shape (1024 x 8192 -> 8192) and 68's (128 x 16384 -> 16384)
# (device_session30_next.sh, written by session 29); then the GPU check session 29 could not run on
# its last commits (ac3c79d, b7844e6: BatchNorm's finalize through welford_combine): the BatchNorm
# modules' GPU tier and KernelBench's eval at bf16 on the BatchNorm files.
bash docs/experiments/device_session30_next.sh
cp /tmp/n/kb12.py /tmp/n/kb68.py $OUT/ 2>/dev/null
GPU_TESTS_LIMIT=220 GPU_TESTS="tests/test_refs_gpu.py tests/test_half_gpu.py -rfEx" KGEN_TEST_REFS=bn_ \
  PRECISIONS=bf16 NUMS="33 39 41 84 97" bash scripts/device_kernelbench.sh
