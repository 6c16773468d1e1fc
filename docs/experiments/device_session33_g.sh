# Session 33, call G (issue 24): at the traced width, each of torch's lanes' Welford loop of a
# constant count (size a multiple of torch's lanes; no `active` branch where every lane's group is
# one of the row's), so that nvcc unrolls it and folds the counts: the row kernel's PTX 548 -> 434
# instructions, 40 -> 23 branches (37, bf16). *_before at 34fcbae, *_after with the change: the same
# bits in bf16 (5 GroupNorm files), the times.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s33/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/g_build.log 2>&1
grep -iE "error" $OUT/g_build.log | head -5
t "same bits"
for n in 37 88 94 75 62; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2; done
t "A/B"
for n in 37 88 75; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
done
t done
