# Session 32, call G (issue 24): where the time of the files furthest behind max-autotune goes
# (call F: 37 2.41x, 75 1.69x, 62 1.65x, 88 1.43x the faster of eager and max-autotune): kernel
# times in bf16, kgen's and eager's.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/g_build.log 2>&1
t "kernels"
timeout 100 python3 scripts/profile_forward.py $A/kb37.py $A/kb75.py $A/kb88.py --dtype bf16 --iters 10 --eager 2>&1 | tee $OUT/g_profile.log | grep -E "ms  |^==" | cut -c1-140
t done
