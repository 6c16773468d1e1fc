# Session 32, call B (issue 24): (1) tile_column_stats with every thread summing (columns a pass =
# gcd(BN, threads): 2 passes of 128 columns in 3 row groups at 128 x 256, 384 threads; before, one
# pass of 256 with 128 threads idle), A/B on the five BatchNorm modules in bf16 (training mode: the
# statistics are fused into the GEMM). (2) The M = 128 modules (68, 66: 128 x 16384 -> 16384), where
# the 128 x 256 tile needs split-K 2 to fill the GPU and cuBLAS runs 128 x 128 unsplit (Nsight
# Compute, session 30: kgen 192 us against 136): the 16-bit GEMM at 128 x 128, 4 and 6 stages
# (docs/experiments/s31/variant.py). (3) Kernel times, kgen against eager, of the files slowest
# against eager in session 31 (66, 68, 45, 56).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/b_build.log 2>&1
grep -iE "error" $OUT/b_build.log | head -5
t "A/B: statistics by every thread"
for n in 39 41 84 97 33; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/b_ab_stats.log | cut -c1-160
t "M = 128: 128 x 256 split-K 2 against 128 x 128 unsplit"
for n in 68 66; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_base.py $A/kb${n}_bn128s4.py $A/kb${n}_bn128s6.py --dtype bf16 2>&1 | tail -4
done | tee $OUT/b_ab_m128.log | cut -c1-160
t "kernels"
timeout 120 python3 scripts/profile_forward.py $A/kb66_base.py $A/kb68_base.py $A/kb68_bn128s6.py $A/kb45_base.py $A/kb56_base.py --dtype bf16 --iters 10 --eager 2>&1 | tee $OUT/b_profile.log | grep -E "ms  |^==" | cut -c1-120
t done
