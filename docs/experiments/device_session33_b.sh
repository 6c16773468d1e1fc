# Session 33, call B (issue 24): S in the module's 16-bit dtype between the GEMM and a row kernel
# (softmax, logsumexp, GroupNorm ...), where S is one of the module's rounded ops: the same bits in
# half the bytes. Files in docs/experiments/s33/ab: *_before at HEAD + session 32's Welford patch
# (the tree before this change), *_after with it; bf16 (and 37 in fp32, which must not change).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s33/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/b_build.log 2>&1
grep -iE "error" $OUT/b_build.log | head -5
t "same bits"
for n in 37 75 62 88 30 84 99 45 18 64 66 14; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2; done | tee $OUT/b_same_bits.log
timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/37_*.py $A/kb37_fp32_before.py $A/kb37_fp32_after.py 2>&1 | tail -2 | tee -a $OUT/b_same_bits.log
t "A/B"
for n in 37 75 62 88 30 84 99 45 18 64 66 14; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/b_ab.log | cut -c1-150
t done
