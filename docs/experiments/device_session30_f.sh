# Session 30, call F (issue 24): call E found the 16-bit GEMM's epilogue ~13 us a tile (K = 64: kgen
# 0.030 ms, cuBLAS 0.008; removing the epilogue call saved 0.021-0.026 ms at K = 2048 and 8192).
# Which part: the generated chain on the registers (`_noapply`: the chain not applied), or the
# store of the tile to global memory (`_nostore`); experiments at K = 64, outputs not kept.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/kb12_k64_noapply.py $A/kb12_k64_nostore.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/f_build.log 2>&1
grep -iE "error" $OUT/f_build.log | head -5
for f in kb12_k64 kb12_k64_noapply kb12_k64_nostore; do
  timeout 120 python3 scripts/profile_forward.py $A/$f.py --dtype bf16 --iters 20; done > $OUT/f_profile.log 2>&1
grep -E "==|ms  " $OUT/f_profile.log | cut -c1-140
t "ncu"
timeout 200 ncu --kernel-name regex:'wgmma_half' --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SourceCounters python3 scripts/profile_forward.py $A/kb12_k64.py --dtype bf16 --iters 2 > $OUT/f_ncu_k64.txt 2>&1
grep -E "Duration|Elapsed Cycles|stalled|Uncoalesced|Bank|excessive|L1/TEX Hit|Throughput" $OUT/f_ncu_k64.txt | cut -c1-150 | head -30
t done
