# Session 50, call C: call A again with the pass restructured. Call A's pass read each row with the
# hash's branch among the loads (nvcc kept fewer loads in flight: x's rows, which hash nothing, ran
# slower too, 39's pass 165 -> 174 us); here the loads come first, the record is read as the row
# arrives, and w's rows and x's take code paths of their own. ab/old at 34ca91c, ab/new at this
# tree: the kept split's GPU tests, the bits (s49/same_bits.py), the kernels of a training forward
# with w unchanged (s49/kernel_times.py) and changed before each forward (s50/changed_w.py), and
# KernelBench's timing (s47/kb_timing_ab.py).
source scripts/device_setup.sh
t "build"
build_files ab/old c_builds_old.log &
build_files ab/new c_builds_new.log
wait
t "tests"
gpu_tests c_gpu_w_split.log 150 tests/test_w_split_gpu.py
t "bits"
for n in 12 33; do
  timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/c_bits_kb${n}.md 2>&1; tail -1 $OUT/c_bits_kb${n}.md
done
t "kernels"
for n in 12 33 84 39 51; do
  timeout 50 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/c_kernels_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/c_kernels_kb${n}.md
done
t "changed w"
for n in 12 39; do
  timeout 50 python3 docs/experiments/s50/changed_w.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/c_changed_kb${n}.md 2>&1; grep -E "split|all kernels" $OUT/c_changed_kb${n}.md
done
t "A/B"
for n in 12 33 84; do
  left=$(( 570 - ($(date +%s) - start) ))
  [ $left -lt 40 ] && break
  KGEN_AB_ROUNDS=7 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/c_ab_kb${n}.md 2>&1
  tail -3 $OUT/c_ab_kb${n}.md
done
t "end"
