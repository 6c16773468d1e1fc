# Session 29, call B (issue 24): the finalize kernel's warps sharing a column's partials, the
# point-wise stage walking rows with its column fixed (no 64-bit division), a LayerNorm's 16-bit
# statistics in fp32 by two passes: A/B against the session's first code (7b725fe's kgen generate
# of each file, docs/experiments/s29/ab/*_before.py; untracked, not kept), interleaved in one process
# (scripts/compare_forward.py) in bf16 and fp32; the GPU tier of the BatchNorm / GroupNorm /
# LayerNorm modules; the bf16 forwards kernel by kernel.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s29/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16); f.build(torch.float32)" $f & done; wait) > $OUT/b_build.log 2>&1 &
t "gpu tests (BatchNorm, GroupNorm, LayerNorm modules)"
KGEN_TEST_REFS=bn_,groupnorm,layernorm timeout 330 python3 -m pytest -m gpu -q -rfEx tests/test_refs_gpu.py tests/test_half_gpu.py \
  tests/test_input_residual.py > $OUT/b_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/b_gpu_tests.log | cut -c1-300
wait
grep -iE "error" $OUT/b_build.log | head -5
t "A/B"
for n in 39 33 84 97 30 88 99; do for d in bf16 fp32; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype $d 2>&1 | tail -3
done; done | tee $OUT/b_ab.log | cut -c1-150
timeout 60 python3 scripts/compare_forward.py docs/experiments/s29/postln.py $A/postln_before.py $A/postln_after.py --dtype bf16 2>&1 | tail -3 | tee -a $OUT/b_ab.log
t "bf16 kernels"
for f in $A/kb39_after.py $A/kb84_after.py $A/kb30_after.py $A/postln_after.py; do
  timeout 60 python3 scripts/profile_forward.py $f --dtype bf16
done > $OUT/b_profile_bf16.log 2>&1
grep -E "==|ms  " $OUT/b_profile_bf16.log | cut -c1-120
t done
