# Session 33, call D (issue 24): GroupNorm's Welford statistics on 8 lanes a group, each lane
# holding several of torch's lanes' states (welford_virtual_reduce: the tree's steps between them
# within the lane, no shuffle), 4 groups a warp where groups of 17-512 elements took a warp each
# and groups of 9-16 a segment of 16 lanes. Files in docs/experiments/s33/ab: *_before at HEAD
# (94f4bc9), *_after with the change: the same bits in bf16 (5 GroupNorm files), the times; in
# fp32 the sums' order changed (8 lanes a group): errors and times.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s33/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/d_build.log 2>&1
grep -iE "error" $OUT/d_build.log | head -5
t "same bits"
for n in 37 88 94 75 62; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2; done | tee $OUT/d_same_bits.log
t "A/B"
for n in 37 88 94 75 62; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/d_ab.log | cut -c1-150
for n in 37 88; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_fp32_before.py $A/kb${n}_fp32_after.py 2>&1 | grep -E "ms  "
done | tee -a $OUT/d_ab.log | cut -c1-150
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb37_after.py $A/kb88_after.py --dtype bf16 --iters 10 2>&1 | tee $OUT/d_profile.log | grep -E "ms  |^==" | cut -c1-140
t done
