# Session 30, call H (issue 24): the generated epilogue now runs as the tile is stored (no pass of its
# own, no barrier) wherever no column statistics are taken of its result; the BatchNorm modules keep
# the pass (call G). A/B against b7844e6 in bf16 (and fp32 for 12 and 84), K = 64; the GPU tier of the
# paths that changed: tile_epilogue is every GEMM family's (fp32 refs on wgmma and mma.sync, a few
# rows on the skinny GEMM, the 16-bit files), and an odd width (301: the stores' scalar path).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16 if '32' not in sys.argv[1] else torch.float32)" $f & done; wait) > $OUT/h_build.log 2>&1
grep -iE "error" $OUT/h_build.log | head -5
t "A/B"
timeout 60 python3 scripts/profile_forward.py $A/kb12_k64.py --dtype bf16 --iters 20 2>&1 | grep -E "ms  " | cut -c1-100
for n in 12 99 84 39 33; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/h_ab.log | cut -c1-150
timeout 60 python3 scripts/compare_forward.py docs/experiments/s29/postln.py $A/postln_before.py $A/postln_after.py --dtype bf16 2>&1 | tail -3 | tee -a $OUT/h_ab.log | cut -c1-150
for n in 12 84; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before32.py $A/kb${n}_after32.py 2>&1 | tail -3
done | tee -a $OUT/h_ab.log | cut -c1-150
t "odd width"
for f in odd_n odd_n_residual; do for d in fp32 bf16; do
  timeout 60 kgen validate $A/$f.py --dtype $d > $OUT/h_validate_${f}_$d.log 2>&1; echo "$f $d exit $?"; tail -1 $OUT/h_validate_${f}_$d.log | cut -c1-200; done; done
t "gpu tests"
KGEN_TEST_REFS=mul_leakyrelu,scale_residual,bn_gelu,gelu_softmax,groupnorm_hardtanh timeout 170 python3 -m pytest -m gpu -q -rfEx \
  tests/test_refs_gpu.py tests/test_half_gpu.py tests/test_skinny_gpu.py > $OUT/h_gpu_tests.log 2>&1
echo "exit $?"; tail -6 $OUT/h_gpu_tests.log | cut -c1-300
t done
