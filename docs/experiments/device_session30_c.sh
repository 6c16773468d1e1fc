# Session 30, call C (issue 24): call B's pairs ran 23 % slower (KernelBench 12 bf16 0.221 ->
# 0.272 ms; Nsight Compute: tensor pipe 58 %). Suspect: the consumers' arrival on the other CTA's
# empty barrier with .release.cluster (a fence at cluster scope per k-tile, in the consumer's issue
# path). A/B of b7844e6, that kernel (v0) and the arrival at the default .release.cta (after).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/kb12_*.py $A/kb84_*.py $A/kb39_*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/c_build.log 2>&1
grep -iE "error" $OUT/c_build.log | head -5
t "A/B"
timeout 60 python3 scripts/compare_forward.py .kb/level2/12_*.py $A/kb12_before.py $A/kb12_v0.py $A/kb12_after.py --dtype bf16 2>&1 | tail -4 | tee $OUT/c_ab.log | cut -c1-150
for n in 84 39; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee -a $OUT/c_ab.log | cut -c1-150
t "ncu"
timeout 150 ncu --kernel-name regex:'wgmma_half' --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    python3 scripts/profile_forward.py $A/kb12_after.py --dtype bf16 --iters 2 > $OUT/c_ncu_kb12.txt 2>&1
grep -E "Duration|Elapsed Cycles|Compute \(SM\)|L2 Cache Throughput|Stall|cycles being stalled" $OUT/c_ncu_kb12.txt | cut -c1-150
t done
