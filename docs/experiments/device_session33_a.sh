# Session 33, call A (issues 24, 25): the GPU checks session 32 left (6401605: GroupNorm's group
# size a constant only at the traced width; df957aa: test_rows_input_gpu's floor), and the timing
# of session 32's unmerged patch (a 16-bit GroupNorm's Welford divisions by power-of-two counts as
# exact products). Files in docs/experiments/s33/ab: *_old at 864f196 (the first form, GPU-verified
# last session), *_new at HEAD, *_pw at HEAD with docs/experiments/s32/welford_pow2_div.patch.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s33/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/a_build.log 2>&1
grep -iE "error" $OUT/a_build.log | head -5
t "same bits"
for n in 75 62 37; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_old.py $A/kb${n}_new.py --dtype bf16 2>&1 | tail -2; done | tee $OUT/a_same_bits.log
timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/75_*.py $A/kb75_fp32_old.py $A/kb75_fp32_new.py 2>&1 | tail -2 | tee -a $OUT/a_same_bits.log
for n in 37 88; do timeout 30 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_new.py $A/kb${n}_pw.py --dtype bf16 2>&1 | tail -2; done | tee -a $OUT/a_same_bits.log
t "A/B welford patch"
for n in 37 88; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_new.py $A/kb${n}_pw.py --dtype bf16 2>&1 | grep -E "ms  "
done | tee $OUT/a_ab.log | cut -c1-150
t "gpu tests"
KGEN_TEST_REFS=groupnorm gpu_tests a_half.log 150 tests/test_half_gpu.py -k "forward_and_buffers or full_gate" > $OUT/sum_half.txt &
KGEN_TEST_REFS=groupnorm gpu_tests a_refs.log 150 tests/test_refs_gpu.py -k "odd_shape" > $OUT/sum_refs.txt &
gpu_tests a_backward.log 150 tests/test_backward_gpu.py -k "groupnorm" > $OUT/sum_backward.txt &
gpu_tests a_rows_input.log 150 tests/test_rows_input_gpu.py > $OUT/sum_rows_input.txt &
wait
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
t done
