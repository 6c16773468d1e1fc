# Session 49, call C: z stored by the TMA unit's bulk copies (cp.async.bulk, a thread a row of the
# tile) while the threads store the output (ab/bulk) against the threads storing both (ab/new,
# calls A-B) and the two passes before (ab/old): the kernels' device time (s49/kernel_times.py)
# and KernelBench's timing replayed (12 in fp32 with a second copy of the new file after the
# others: how much the order of the files moves a row); the bits against the old file; then
# tests/test_keep_z_gpu.py on the bulk copies and the rest of call B's round16 tests.
source scripts/device_setup.sh
t "build"
build_files ab/old c_builds_old.log &
build_files ab/new c_builds_new.log &
build_files ab/bulk c_builds_bulk.log
wait
mkdir -p ab/new2 && cp ab/new/kb12_fp32.py ab/new2/kb12_fp32.py
t "bits"
for n in 12 59; do
  timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/bulk/kb${n}.py > $OUT/c_bits_kb${n}.md 2>&1; tail -1 $OUT/c_bits_kb${n}.md
done
timeout 60 python3 docs/experiments/s49/same_bits.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/bulk/kb12_fp32.py > $OUT/c_bits_kb12_fp32.md 2>&1; tail -1 $OUT/c_bits_kb12_fp32.md
t "kernel times"
for n in 12 59 86; do
  timeout 60 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py ab/bulk/kb${n}.py > $OUT/c_kernels_kb${n}.md 2>&1; grep "all kernels\|KeepingZ\|Store" $OUT/c_kernels_kb${n}.md
done
timeout 60 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py ab/bulk/kb12_fp32.py > $OUT/c_kernels_kb12_fp32.md 2>&1; grep "all kernels\|KeepingZ\|Store" $OUT/c_kernels_kb12_fp32.md
t "A/B"
for n in 12 59 86; do
  KGEN_AB_ROUNDS=9 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py ab/bulk/kb${n}.py > $OUT/c_ab_kb${n}.md 2>&1; tail -4 $OUT/c_ab_kb${n}.md
done
KGEN_AB_ROUNDS=9 timeout 60 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/12_*.py) fp32 ab/old/kb12_fp32.py ab/new/kb12_fp32.py ab/bulk/kb12_fp32.py ab/new2/kb12_fp32.py > $OUT/c_ab_kb12_fp32.md 2>&1; tail -5 $OUT/c_ab_kb12_fp32.md
t "tests"
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests c_gpu_keep_z.log $(( left * 2 / 3 )) tests/test_keep_z_gpu.py
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests c_gpu_round16.log $left tests/test_wgmma_round16_gpu.py -k "not gemm_scale_bn-2-1024-8192-8192"
t "end"
