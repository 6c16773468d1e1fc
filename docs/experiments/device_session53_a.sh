# Session 53, call A (issue 25's x pass, issue 24/25's narrow outputs):
# 1. x's split at rows of 1024-8192: the kernels side by side (s53/split_rows_bench.py: the block
#    kernel, its launch-bound and 4-quad variants, the warp-a-row kernel at 8/16/32 quads a lane
#    and blocks of 32-256 threads), each variant's bytes against the block kernel's.
# 2. The warp kernel at 16 quads a lane for K <= 2048 (docs/experiments/s52/short_rows_2048.patch,
#    applied): the GPU tests (w's split; the gate at K = 1000 and 2040), the same bits and the
#    kernels' time on KernelBench 45 (ab/old: the kernel as committed, ab/new: patched), 39 beside.
# 3. Narrow outputs (N 16-32): fp16x3 and tf32x3 at 64x128/128x128 and 64x64 tiles, and
#    --backend cublas (fp32 SGEMM + kgen's epilogue), the kernels' time beside eager's.
source scripts/device_setup.sh
t "build (in the background), split bench"
(build_files ab/old a_builds_old.log; build_files ab/new a_builds_new.log; build_files ab/nar a_builds_nar.log) &
python3 docs/experiments/s53/split_rows_bench.py > /tmp/srb.cu && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a /tmp/srb.cu -o /tmp/srb && /tmp/srb | tee $OUT/a_split_rows.md
t "tests"
gpu_tests a_gpu.log 300 tests/test_w_split_gpu.py "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape7]" "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape8]"
wait
t "the same bits"
for n in 45 39; do timeout 40 python3 docs/experiments/s49/same_bits.py .kb/level2/${n}_*.py fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_bits_kb$n.md 2>&1; echo "$n: $(tail -3 $OUT/a_bits_kb$n.md | tr '\n' ' ' | cut -c1-300)"; done
t kernels
for n in 45 39; do timeout 60 python3 docs/experiments/s49/kernel_times.py .kb/level2/${n}_*.py fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_kernels_kb$n.md 2>&1; grep -E "split|all kernels" $OUT/a_kernels_kb$n.md; done
t narrow
for s in 16384_256_32 8192_1024_16 1024_1024_32; do b=${s%%_*}; S51_AS_EMITTED=1 timeout 60 python3 docs/experiments/s51/w_in_registers_rows.py ab/nar/ref_$s.py ab/nar/${s}_fp16x3_fp32.py $b ab/nar/${s}_fp16x3bn64_fp32.py ab/nar/${s}_tf32x3_fp32.py ab/nar/${s}_tf32x3bn64_fp32.py ab/nar/${s}_cublas_fp32.py > $OUT/a_narrow_$s.md 2>&1; echo "$s:"; tail -8 $OUT/a_narrow_$s.md; done
t end
