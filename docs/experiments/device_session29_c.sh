# Session 29, call C (issue 24): why KernelBench 39's bf16 BatchNorm stage 2 (pointwise_kernel,
# 0.229 ms for 268 MB read and 134 MB written on an H200) and the row kernels (84's softmax, the
# post-norm block's LayerNorm) run far under the memory's bandwidth: Nsight Compute's stall
# reasons, instruction mix and memory sections on each.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s29/ab
for f in $A/kb39_after.py $A/kb84_after.py $A/postln_after.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
EmittedFile(sys.argv[1]).build(torch.bfloat16)" $f & done > $OUT/c_build.log 2>&1; wait
for f in $A/kb39_after.py $A/kb84_after.py $A/postln_after.py; do
  b=$(basename $f .py)
  timeout 150 ncu --kernel-name regex:'pointwise_kernel|row_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section Occupancy --section LaunchStats \
    python3 scripts/profile_forward.py $f --dtype bf16 --iters 2 > $OUT/c_ncu_$b.txt 2>&1
  echo "=== $b"
  grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Issued Ipc|Executed Ipc|No Eligible|Active Warps Per|Eligible Warps|Executed Instructions  |L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|One or More" $OUT/c_ncu_$b.txt | cut -c1-110 | head -40
  grep -iE -A3 "warp.*stall|stalled" $OUT/c_ncu_$b.txt | grep -vE "^--$" | cut -c1-200 | head -14
done
t done
