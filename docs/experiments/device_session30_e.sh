# Session 30, call E (issue 24): call D put the 16-bit GEMM's time at 1024 x K -> 8192 as 0.031 ms +
# K x 0.0200 ms per 1024 (cuBLAS: 0.005 + K x 0.0204): the mainloops run at one rate, kgen pays
# ~15 us a wave more outside it. Where: K = 64 and 512 (the fixed cost alone), and the same files
# with the GEMM's epilogue call removed (`_noepi`, an experiment: output not written).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/kb12_k64.py $A/kb12_k512.py $A/kb12_after_noepi.py $A/kb12_k2048_noepi.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/e_build.log 2>&1
grep -iE "error" $OUT/e_build.log | head -5
for f in kb12_k64 kb12_k512 kb12_k2048 kb12_k2048_noepi kb12_after kb12_after_noepi; do
  timeout 120 python3 scripts/profile_forward.py $A/$f.py --dtype bf16 --eager --iters 20; done > $OUT/e_profile.log 2>&1
grep -E "==|ms  " $OUT/e_profile.log | grep -v elementwise | cut -c1-140
t "ncu at K = 64"
timeout 120 ncu --kernel-name regex:'wgmma_half|nvjet' --launch-skip 2 --launch-count 2 --section SpeedOfLight \
    python3 scripts/profile_forward.py $A/kb12_k64.py --dtype bf16 --eager --iters 2 > $OUT/e_ncu_k64.txt 2>&1
grep -E "^  [a-zA-Z_n]|Duration|Elapsed Cycles|SM Active" $OUT/e_ncu_k64.txt | cut -c1-120
t done
