# Session 32, call E (issue 24): the row kernel's copy of S into shared memory by 16-byte loads,
# four in flight a thread, before every cached first pass (which read S from global memory itself,
# one float at a time), A/B against 84bc58d on the row modules (66's and 99's and 84's softmax, 45's
# and 18's logsumexp, 30's GroupNorm) in bf16 and fp32; then the GPU tests of the row modules.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/e_build.log 2>&1
grep -iE "error" $OUT/e_build.log | head -5
t "A/B"
for n in 66 45 99 84 30 18; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/e_ab.log | cut -c1-150
for n in 99 30; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_fp32_before.py $A/kb${n}_fp32_after.py 2>&1 | grep -E "ms  "
done | tee -a $OUT/e_ab.log | cut -c1-150
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb66_after.py $A/kb45_after.py $A/kb99_after.py --dtype bf16 --iters 10 2>&1 | tee $OUT/e_profile.log | grep -E "ms  |^==" | cut -c1-120
t "gpu tests"
R=softmax,lse,groupnorm,layernorm,sum,pool,normalize
KGEN_TEST_REFS=$R gpu_tests e_refs.log 300 tests/test_refs_gpu.py -k "odd_shape or kernelbench_shape" > $OUT/sum_refs.txt &
KGEN_TEST_REFS=$R gpu_tests e_half.log 300 tests/test_half_gpu.py -k "forward_and_buffers" > $OUT/sum_half.txt &
gpu_tests e_eager_sum.log 300 tests/test_eager_sum_gpu.py > $OUT/sum_eager.txt &
wait
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
t done
