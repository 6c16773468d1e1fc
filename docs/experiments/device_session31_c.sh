# Session 31, call C (issue 24): does a second CTA on each SM hide the 16-bit GEMM's epilogue and
# prologue behind the other CTA's mainloop? Variants of `kgen generate REF --dtype bf16` made by
# docs/experiments/s31/variant.py (the 16-bit GEMM's BN and stages, and the kernel's
# __launch_bounds__ minimum of CTAs per SM): base (128 x 256, 4 stages, one CTA an SM: 192 KB),
# t64 (--tile 64x128x32: 64 x 256, one CTA), 64x128x2 (64 x 128, 4 stages, 96 KB, two CTAs an SM,
# 128 registers: ptxas spills 248 bytes), 128x128 (12 only: 128 x 128, 4 stages, one CTA).
# Kernel times at K = 64 (the cost around the mainloop), then the forwards interleaved.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s31/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/c_build.log 2>&1
grep -iE "error" $OUT/c_build.log | head -5
t "K = 64"
timeout 90 python3 scripts/profile_forward.py $A/k64_base.py $A/k64_t64.py $A/k64_64x128x2.py --dtype bf16 --iters 20 --eager 2>&1 | tee $OUT/c_k64.log | grep -E "ms  |^==" | cut -c1-110
t "forwards"
timeout 100 python3 scripts/compare_forward.py .kb/level2/12_*.py $A/kb12_base.py $A/kb12_t64.py $A/kb12_64x128x2.py $A/kb12_128x128.py --dtype bf16 2>&1 | tail -5 | tee $OUT/c_ab.log | cut -c1-160
for n in 39 84 99; do
  timeout 100 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_base.py $A/kb${n}_t64.py $A/kb${n}_64x128x2.py --dtype bf16 2>&1 | tail -4
done | tee -a $OUT/c_ab.log | cut -c1-160
t "kernels"
timeout 100 python3 scripts/profile_forward.py $A/kb12_base.py $A/kb12_64x128x2.py $A/kb39_base.py $A/kb39_64x128x2.py --dtype bf16 --iters 10 2>&1 | tee $OUT/c_profile.log | grep -E "ms  |^==" | cut -c1-110
t done
