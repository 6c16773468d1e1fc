# Session 50, call D: the split pass as two launches, x's rows without the hash's code and w's with
# it (call C's one kernel: 39's pass, whose x has 16384 rows, 165 -> 176 us with w changed before
# each forward, where 12's, with twice w's rows, moved 6 us). ab/old at 34ca91c, ab/new at this tree:
# the kept split's GPU tests, the bits, the kernels with w unchanged and changed, KernelBench's timing.
source scripts/device_setup.sh
t "build"
build_files ab/old d_builds_old.log &
build_files ab/new d_builds_new.log
wait
t "tests"
gpu_tests d_gpu_w_split.log 150 tests/test_w_split_gpu.py
t "bits"
for n in 12 39; do
  timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/d_bits_kb${n}.md 2>&1; tail -1 $OUT/d_bits_kb${n}.md
done
t "kernels"
for n in 12 39 51; do
  timeout 50 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/d_kernels_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/d_kernels_kb${n}.md
done
t "changed w"
for n in 12 39; do
  timeout 50 python3 docs/experiments/s50/changed_w.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/d_changed_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/d_changed_kb${n}.md
done
t "A/B"
for n in 12 39; do
  KGEN_AB_ROUNDS=7 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/d_ab_kb${n}.md 2>&1
  tail -3 $OUT/d_ab_kb${n}.md
done
t "end"
