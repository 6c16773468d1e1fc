# Session 32, call C (issue 24): the two changes of this session against HEAD before them (base):
# the 16-bit GEMM's 128-wide tiles where 256-wide ones fill at most half the GPU (68, 66), and the
# row kernel's threads by the row's width (eight columns a thread, 64 to 512: 45's 1024-column
# logsumexp; 99's and 84's 8192-column softmax keep 512), A/B interleaved; then the GPU tests of
# what they touch (16-bit split-K, eager-order sums, the row modules in bf16/fp16 and fp32).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s32/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'fp32' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/c_build.log 2>&1
grep -iE "error" $OUT/c_build.log | head -5
t "A/B"
for n in 68 66 45 99 84; do
  extra=$([ $n = 68 ] || [ $n = 66 ] && echo $A/kb${n}_bn128s6.py)
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_base.py $A/kb${n}_after.py $extra --dtype bf16 2>&1 | grep -E "ms  " 
done | tee $OUT/c_ab.log | cut -c1-150
for n in 45 99; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_fp32_base.py $A/kb${n}_fp32_after.py 2>&1 | grep -E "ms  "
done | tee -a $OUT/c_ab.log | cut -c1-150
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb45_after.py $A/kb66_after.py --dtype bf16 --iters 10 2>&1 | tee $OUT/c_profile.log | grep -E "ms  |^==" | cut -c1-120
t "gpu tests"
gpu_tests c_split.log 330 tests/test_split_k_gpu.py -k "16_bit" > $OUT/sum_split.txt &
gpu_tests c_eager_sum.log 330 tests/test_eager_sum_gpu.py > $OUT/sum_eager.txt &
KGEN_TEST_REFS=softmax,lse,groupnorm,layernorm,sum gpu_tests c_half.log 330 tests/test_half_gpu.py -k "forward_and_buffers or full_gate" > $OUT/sum_half.txt &
wait
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
t done
