# Session 32, call H (issue 24): GroupNorm's statistics of groups of at most 16 elements by
# segments of a warp (32 / lanes groups a warp at once), and the group's size a constant in the
# output pass (was N / groups: an integer division per element), against HEAD before them:
# the same bits (docs/experiments/s32/same_bits.py; the segments' reductions are the warp's minus
# steps over empty lanes), then the times, then the GPU tests of the GroupNorm modules.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/h_build.log 2>&1
grep -iE "error" $OUT/h_build.log | head -5
t "same bits"
for n in 75 62 88 37 30; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2; done | tee $OUT/h_same_bits.log
for n in 75 37; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_fp32_before.py $A/kb${n}_fp32_after.py 2>&1 | tail -2; done | tee -a $OUT/h_same_bits.log
t "A/B"
for n in 75 62 88 37; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/h_ab.log | cut -c1-150
t "gpu tests"
KGEN_TEST_REFS=groupnorm gpu_tests h_half.log 100 tests/test_half_gpu.py -k "forward_and_buffers or full_gate" > $OUT/sum_half.txt &
KGEN_TEST_REFS=groupnorm gpu_tests h_refs.log 100 tests/test_refs_gpu.py -k "odd_shape" > $OUT/sum_refs.txt &
gpu_tests h_backward.log 100 tests/test_backward_gpu.py -k "groupnorm" > $OUT/sum_backward.txt &
wait
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
t done
