# Session 53, call B (issue 25: outputs no wider than a tile): fp16x3's GEMM with x split in its
# registers (x_in_registers: N <= BN; A = x's rows fp32 by TMA, split a k-tile at a time, B = w's
# kept split), which replaces x's pass there (call A: 19.4 of 8192 x 1024 -> 16's 43.5 us).
# 1. GPU tests (two processes, beside the builds): w's split (the w-in-registers mainloop, now
#    shared with x's: run_in_registers), the gate at 250 / 200 rows (w in registers), K = 1000 and
#    2040 (the short-row pass), and four narrow outputs (N = 16, 100, 32 with K split 8 ways, a
#    chained GEMM's second N = 24).
# 2. The kernels' time at five narrow shapes, four tiles with x in registers, 128x64 with x's pass
#    (KGEN_F16X3_X_IN_REGISTERS 0), cuBLAS's SGEMM file, eager.
# 3. Errors against fp64 with x in registers and with the pass (s49/same_bits.py).
source scripts/device_setup.sh
t "builds and tests"
build_files ab/nar b_builds.log &
gpu_tests b_gpu1.log 450 tests/test_w_split_gpu.py "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-250-shape4]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_sigmoid_gemm_lse-200-shape6]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape7]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape8]" &
gpu_tests b_gpu2.log 450 "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape9]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_swish_scale-1000-shape10]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape11]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_sigmoid_gemm_lse-1000-shape12]" &
wait
t "narrow outputs"
for s in 8192_1024_16 16384_256_32 1024_1024_32 8192_1024_64 4096_4096_10; do b=${s%%_*}; S51_AS_EMITTED=1 timeout 50 python3 docs/experiments/s51/w_in_registers_rows.py ab/nar/ref_$s.py ab/nar/${s}_xr128x64_fp32.py $b ab/nar/${s}_xr128x128_fp32.py ab/nar/${s}_xr64x64_fp32.py ab/nar/${s}_xr64x128_fp32.py ab/nar/${s}_pass128x64_fp32.py ab/nar/${s}_cublas_fp32.py > $OUT/b_narrow_$s.md 2>&1; echo "$s:"; grep -E "^\| (batch|[0-9])" $OUT/b_narrow_$s.md; done
t "errors"
for s in 8192_1024_16 4096_4096_10; do timeout 40 python3 docs/experiments/s49/same_bits.py ab/nar/ref_$s.py fp32 ab/nar/${s}_pass128x64_fp32.py ab/nar/${s}_xr128x64_fp32.py > $OUT/b_errors_$s.md 2>&1; echo "$s:"; tail -8 $OUT/b_errors_$s.md; done
t end
