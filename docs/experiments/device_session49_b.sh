# Session 49, call B: call A's A/B moved the other way for 12 in fp32 (+51 us of 785 by
# KernelBench's timing) and 59 in bf16 (+11 of 549) where 12, 40 and 86 in bf16 gained. Here the
# kernels' own device time per training forward (s49/kernel_times.py, the profiler), old and
# new, then KernelBench's timing again with more rounds; then the GPU tests of the paths around
# a point-wise part's training forward (backward, cuBLAS's backward, split-K, round16, fp16x3).
source scripts/device_setup.sh
t "build"
build_files ab/old b_builds_old.log &
build_files ab/new b_builds_new.log
wait
t "kernel times"
timeout 60 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py > $OUT/b_kernels_kb12_fp32.md 2>&1; cat $OUT/b_kernels_kb12_fp32.md | tail -8
for n in 12 59; do
  timeout 60 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/b_kernels_kb${n}.md 2>&1; tail -8 $OUT/b_kernels_kb${n}.md
done
t "A/B"
KGEN_AB_ROUNDS=13 timeout 100 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py > $OUT/b_ab_kb12_fp32.md 2>&1; tail -3 $OUT/b_ab_kb12_fp32.md
KGEN_AB_ROUNDS=13 timeout 80 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/59_*.py) bf16 ab/old/kb59.py ab/new/kb59.py > $OUT/b_ab_kb59.md 2>&1; tail -3 $OUT/b_ab_kb59.md
t "tests"
left=$(( 565 - ($(date +%s) - start) ))
gpu_tests b_gpu_paths.log $left tests/test_backward_gpu.py tests/test_cublas_backward_gpu.py tests/test_split_k_gpu.py tests/test_fp16x3.py tests/test_wgmma_round16_gpu.py
t "end"
