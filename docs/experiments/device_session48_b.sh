# Session 48, call B: the forward's host path written out (f8cce8d: the part's body hands its C
# entry the arguments in the entry's order; the forward asks torch.autocast's state once for
# every parameter's check; a BatchNorm's parameters and buffers read once) and the C entry's
# dynamic shared memory allowed once per kernel and device (allow_dynamic_smem), against the file
# before them (ab/old: a68e193, session 47's last code), as KernelBench's eval times them
# (s47/kb_timing_ab.py) on five files in bf16; the new files against a bare launch of their
# kernels (s48/host_ceiling.py); then the GPU tests of the launch's compiled, few-row and constant
# paths.
# (ab/old/kbN.py, ab/new/kbN.py, not committed: `kgen generate .kb/level2/N_*.py --dtype bf16`
# in a worktree of a68e193 and in this tree, for N in 12 33 51 66 80.)
source scripts/device_setup.sh
t "build"
build_files ab/old b_builds_old.log &
build_files ab/new b_builds_new.log
wait
t "A/B"
for n in 12 33 51 66 80; do
  timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/b_ab_kb${n}.md 2>&1
  tail -4 $OUT/b_ab_kb${n}.md
done
t "ceiling"
for n in 12 33; do
  timeout 60 python3 docs/experiments/s48/host_ceiling.py $(ls .kb/level2/${n}_*.py) bf16 ab/new/kb${n}.py > $OUT/b_ceiling_kb${n}.md 2>&1
  tail -6 $OUT/b_ceiling_kb${n}.md
done
t "launch parts"
timeout 40 python3 docs/experiments/s47/launch_parts.py $(ls .kb/level2/12_*.py) ab/new/kb12.py bf16 > $OUT/b_parts_new_kb12.log 2>&1
timeout 40 python3 docs/experiments/s47/launch_parts.py $(ls .kb/level2/12_*.py) ab/old/kb12.py bf16 > $OUT/b_parts_old_kb12.log 2>&1
head -5 $OUT/b_parts_old_kb12.log $OUT/b_parts_new_kb12.log
t "tests"
gpu_tests b_gpu_custom_ops.log 180 tests/test_custom_ops.py
left=$(( 480 - ($(date +%s) - start) ))
gpu_tests b_gpu_skinny.log $(( left > 90 ? 90 : left )) tests/test_skinny_gpu.py
left=$(( 550 - ($(date +%s) - start) ))
gpu_tests b_gpu_constant.log $left tests/test_constant_gpu.py
t "end"
