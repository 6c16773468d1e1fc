# Session 47, call C: the forward's host path trimmed (the launch allocates no workspace where
# the kernels need none, reads x's device once, looks up its argument names and entry point once,
# _kgen_traced's queries looked up once, _kgen_checked_param asks autocast's state once) against
# the file before it (ab/old: the same CUDA source, the commit before's Python), as KernelBench's
# eval times them (s47/kb_timing_ab.py) on five of its files in bf16; then the GPU tests of the
# launch's path through every family (test_gpu.py builds each family and math), the compiled and
# graphed paths, the few-row GEMM and the constant outputs.
# (ab/old/kbN.py and ab/new/kbN.py, not committed: `kgen generate .kb/level2/N_*.py --dtype bf16`
# in a worktree of e6466e1 and in this tree at 50c57bb, for N in 12 33 51 66 80.)
source scripts/device_setup.sh
t "build"
build_files ab/new c_builds.log
t "A/B"
for n in 12 33 51 66 80; do
  timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/c_ab_kb${n}.md 2>&1
  tail -4 $OUT/c_ab_kb${n}.md
done
t "tests"
gpu_tests c_gpu_custom_ops.log 60 tests/test_custom_ops.py
left=$(( 505 - ($(date +%s) - start) ))
gpu_tests c_gpu_families.log $(( left > 300 ? 300 : left )) tests/test_gpu.py
left=$(( 505 - ($(date +%s) - start) ))
gpu_tests c_gpu_skinny.log $(( left > 60 ? 60 : left )) tests/test_skinny_gpu.py
left=$(( 515 - ($(date +%s) - start) ))
gpu_tests c_gpu_constant.log $left tests/test_constant_gpu.py
t "end"
