# Session 33, call F (issue 24): where KernelBench 37's bf16 forward goes now (GEMM 0.79 ms, row
# kernel 0.37): Nsight Compute on each kernel, and the row kernel at 256 threads a row instead of
# row_threads(4096) = 512 (kb37_t256.py: the emitted file with that one line changed).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s33/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/f_build.log 2>&1
grep -iE "error" $OUT/f_build.log | head -5
t "same bits, A/B"
timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/37_*.py $A/kb37_after.py $A/kb37_t256.py --dtype bf16 2>&1 | tail -2
timeout 40 python3 scripts/compare_forward.py .kb/level2/37_*.py $A/kb37_after.py $A/kb37_t256.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
t "ncu"
for k in row_kernel wgmma_half; do
  timeout 100 ncu --kernel-name regex:$k --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats python3 scripts/profile_forward.py $A/kb37_after.py --dtype bf16 --iters 2 > $OUT/f_ncu_$k.txt 2>&1
  echo "== $k"; grep -E "Duration|Elapsed Cycles|Throughput|stalled|Achieved Occupancy|Registers Per|Block Limit|Bank|Uncoalesced|excessive|Hit Rate" $OUT/f_ncu_$k.txt | cut -c1-150 | head -24
done
t done
