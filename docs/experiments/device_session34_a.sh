# Session 34, call A: the GPU checks session 33 left (its device time was spent; plan
# docs/experiments/device_session34_next.sh, part 1), and where 37's 16-bit GEMM spends its time
# outside the mainloop (Nsight Compute, for the ping-pong kernel's design).
#   - the review's fix of a warp a group for few groups (3c9f468: KernelBench 30);
#   - the hyperparameter guard's fixes (8e767cf) under torch.compile(fullgraph) and CUDA graphs;
#   - KernelBench 30 / 37 / 88 at HEAD against 34fcbae's files (call E's): same bits, times.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s34/ab
build_files $A a_build.log
t "same bits, HEAD against 34fcbae"
for n in 30 37 88; do timeout 40 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2; done
t "A/B"
for n in 30 37 88; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
done
t "ncu: 37's GEMM"
timeout 90 ncu --kernel-name regex:wgmma_half --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy python3 scripts/profile_forward.py $A/kb37_after.py --dtype bf16 --iters 2 > $OUT/a_ncu37.txt 2>&1
grep -E "Duration|Elapsed Cycles|SM Throughput|Registers Per|Executed Ipc A|Issue Slots|Stall|Warp Cycles Per Issued" $OUT/a_ncu37.txt | head -30
t "the guard under torch.compile and CUDA graphs"
gpu_tests a_custom_ops.log 120 tests/test_custom_ops.py
t done
