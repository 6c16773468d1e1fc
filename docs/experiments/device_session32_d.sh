# Session 32, call D (issue 24): is fusion 0 still faster in bf16? choose.rule_fusion runs the
# point-wise chain of a 16-bit module that calls exp / log / erf / tanh in a kernel of its own, from
# session 12's H100 numbers, when the chain ran on the consumer warps' registers; since session 30
# it runs as the tile is stored, by all 384 threads. The eight KernelBench files the rule sends to
# fusion 0 in bf16, fusion 0 against 1, interleaved; then the 16-bit split-K test with its new check
# (KernelBench 68's shape runs unsplit).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/d_build.log 2>&1
grep -iE "error" $OUT/d_build.log | head -5
t "fusion 0 against 1, bf16"
for n in 29 45 53 59 70 81 86 95; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_f0.py $A/kb${n}_f1.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/d_ab_fusion.log | cut -c1-150
t "gpu tests"
gpu_tests d_split.log 200 tests/test_split_k_gpu.py -k "16_bit"
t done
