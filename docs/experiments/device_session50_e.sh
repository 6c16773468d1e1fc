# Session 50, call E: w changed before each forward again, the old file zeroing as many floats of
# its own (s50/changed_w.py: call D's 39 read 14 us slower where only the new file's fill left the
# L2 cache dirty); then KernelBench's own eval at fp32 on files whose GEMM keeps w's split (12, 33,
# 84: 1024 x 8192 -> 8192; 51: 2048 rows) and the GPU tests of the fp16x3 GEMM's other paths (split-K,
# w in registers, the gate at odd shapes and KernelBench's).
source scripts/device_setup.sh
t "build"
build_files ab/old e_builds_old.log &
build_files ab/new e_builds_new.log
wait
t "changed w"
for n in 12 39; do
  timeout 50 python3 docs/experiments/s50/changed_w.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/e_changed_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/e_changed_kb${n}.md
done
t "tests"
gpu_tests e_gpu_fp16x3.log 200 tests/test_split_k_gpu.py tests/test_gpu.py -k "fp16x3"
t "kernelbench eval"
left=$(( 560 - ($(date +%s) - start) ))
NUMS="12 33 84 51" PRECISIONS=fp32 EVAL_LIMIT=$left bash scripts/device_kernelbench.sh 2>&1 | tail -12
t "end"
