# Session 29, call E (issue 24): pointwise_grid giving each thread four rows at least (KernelBench
# 97 at 1024 rows ran one row per thread, 4 % slower than before), A/B against call D's grid
# (docs/experiments/s29/ab/*_after2.py) on 97, 33, 39, 84 in bf16; then KernelBench's eval at bf16
# on all 36 files at this code (kgen's ratio to eager bf16 per file, the family's median).
unset PYTHONDONTWRITEBYTECODE
A=docs/experiments/s29/ab
. scripts/device_setup.sh
(for f in $A/kb97_after*.py $A/kb33_after2.py $A/kb33_after3.py $A/kb39_after2.py $A/kb39_after3.py $A/kb84_after.py $A/kb84_after3.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/e_build.log 2>&1
t "A/B"
for n in 97 33 39; do
  timeout 70 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_after2.py $A/kb${n}_after3.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/e_ab.log | cut -c1-150
timeout 70 python3 scripts/compare_forward.py .kb/level2/84_*.py $A/kb84_after.py $A/kb84_after3.py --dtype bf16 2>&1 | tail -3 | tee -a $OUT/e_ab.log | cut -c1-150
t "KernelBench eval, bf16, 36 files"
PRECISIONS=bf16 EVAL_LIMIT=420 bash scripts/device_kernelbench.sh
