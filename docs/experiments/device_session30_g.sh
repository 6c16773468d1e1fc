# Session 30, call G (issue 24): call F found the generated epilogue on the consumers' registers
# ~8 us a 128 x 256 tile (KernelBench 12 at K = 64: 0.030 ms, 0.013 without it): each thread loads
# its per-column operands one after another. Now the epilogue runs on the tile in shared memory by
# the whole CTA (tile_epilogue), except an fp32 build's BatchNorm statistics. A/B against b7844e6
# (bf16, and fp32 for 12 and 84), the post-norm block (per-element operands), K = 64; then the GPU
# tier of the paths that changed (every module's 16-bit file, the fp32 refs, split-K, fusion 0).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16 if '32' not in sys.argv[1] else torch.float32)" $f & done; wait) > $OUT/g_build.log 2>&1
grep -iE "error" $OUT/g_build.log | head -5
t "A/B"
timeout 60 python3 scripts/profile_forward.py $A/kb12_k64.py --dtype bf16 --eager --iters 20 2>&1 | grep -E "==|ms  " | grep -v elementwise | cut -c1-120
for n in 12 84 39 33 30 99; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/g_ab.log | cut -c1-150
timeout 60 python3 scripts/compare_forward.py docs/experiments/s29/postln.py $A/postln_before.py $A/postln_after.py --dtype bf16 2>&1 | tail -3 | tee -a $OUT/g_ab.log | cut -c1-150
for n in 12 84; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before32.py $A/kb${n}_after32.py 2>&1 | tail -3
done | tee -a $OUT/g_ab.log | cut -c1-150
t "gpu tests"
timeout 330 python3 -m pytest -m gpu -q -rfEx -x tests/test_half_gpu.py tests/test_split_k_gpu.py tests/test_fusion0.py \
  > $OUT/g_gpu_tests.log 2>&1
echo "exit $?"; tail -6 $OUT/g_gpu_tests.log | cut -c1-300
t done
