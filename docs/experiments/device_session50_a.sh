# Session 50, call A: w's fp16x3 split kept from call to call (hashed rows; gemm_wgmma_f16x3.cuh)
# against splitting it on every call (ab/old at 34ca91c, ab/new at this tree): the new GPU tests of
# the kept split first, then the bits (outputs and gradients, s49/same_bits.py), the kernels of a
# training forward with w unchanged (s49/kernel_times.py) and with w changed before each forward
# (s50/changed_w.py: a training step's case), and KernelBench's timing (s47/kb_timing_ab.py).
source scripts/device_setup.sh
t "build"
build_files ab/old a_builds_old.log &
build_files ab/new a_builds_new.log
wait
t "tests"
gpu_tests a_gpu_w_split.log 150 tests/test_w_split_gpu.py
t "bits"
for n in 12 33; do
  timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_bits_kb${n}.md 2>&1; tail -1 $OUT/a_bits_kb${n}.md
done
t "kernels"
for n in 12 33 84 39 51; do
  timeout 50 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_kernels_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/a_kernels_kb${n}.md
done
t "changed w"
for n in 12 39; do
  timeout 50 python3 docs/experiments/s50/changed_w.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_changed_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/a_changed_kb${n}.md
done
t "A/B"
for n in 12 33 84; do
  left=$(( 570 - ($(date +%s) - start) ))
  [ $left -lt 40 ] && break
  KGEN_AB_ROUNDS=7 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/a_ab_kb${n}.md 2>&1
  tail -3 $OUT/a_ab_kb${n}.md
done
t "end"
