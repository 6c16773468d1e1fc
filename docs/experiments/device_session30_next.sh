# What session 29 leaves for the next session's device time (issue 24, ~4 min): the 16-bit GEMM is
# what stands between the bf16 tier and its goals (docs/perf.md, session 29: 0.183-0.189 ms against
# cuBLAS's 0.168-0.171 at 1024 x 8192 -> 8192; 0.18 against 0.136 at 128 x 16384 -> 16384, where
# split-K did not help). Nsight Compute on kgen's GEMM and on eager's cuBLAS GEMM (nvjet, a cluster
# of two) at both shapes, side by side: tensor pipe utilization, L2 and DRAM throughput, the stall
# reasons of the consumer warps. Run on an H100 where one is lent (the goals are an H100's).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/n
for n in 12 68; do kgen generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/n/kb$n.py --force > /dev/null 2>&1
  python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
EmittedFile(sys.argv[1]).build(torch.bfloat16)" /tmp/n/kb$n.py; done > $OUT/n_build.log 2>&1
for n in 12 68; do
  timeout 200 ncu --kernel-name regex:'wgmma_half|nvjet' --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 scripts/profile_forward.py /tmp/n/kb$n.py --dtype bf16 --eager --iters 2 > $OUT/n_ncu_kb$n.txt 2>&1
  grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Tensor|Cluster|Stall" \
    $OUT/n_ncu_kb$n.txt | cut -c1-120 | head -40
done
t done
