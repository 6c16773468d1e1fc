# Session 49, call A: a point-wise part's training forward with z and the output stored by the
# GEMM's one epilogue (KeepingZ) against the two passes before it (ab/old at f556624, ab/new at
# this tree): the builds' time (old, then new, each five files at once), the bits (outputs and
# gradients, s49/same_bits.py), KernelBench's timing replayed (s47/kb_timing_ab.py), then the
# new GPU tests of the path (tests/test_keep_z_gpu.py).
source scripts/device_setup.sh
t "build old"
build_files ab/old a_builds_old.log
t "build new"
build_files ab/new a_builds_new.log
t "bits"
for n in 12 59 86 40; do
  timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/a_bits_kb${n}.md 2>&1; tail -1 $OUT/a_bits_kb${n}.md
done
timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py > $OUT/a_bits_kb12_fp32.md 2>&1; tail -1 $OUT/a_bits_kb12_fp32.md
t "A/B"
for n in 12 59 86 40; do
  KGEN_AB_ROUNDS=7 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/a_ab_kb${n}.md 2>&1
  tail -3 $OUT/a_ab_kb${n}.md
done
KGEN_AB_ROUNDS=7 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py > $OUT/a_ab_kb12_fp32.md 2>&1
tail -3 $OUT/a_ab_kb12_fp32.md
t "tests"
left=$(( 565 - ($(date +%s) - start) ))
gpu_tests a_gpu_keep_z.log $left tests/test_keep_z_gpu.py
t "end"
