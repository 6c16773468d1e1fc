# Session 31, call B (issue 24): the tile stores in batches of four (each batch's tile reads and
# generated-epilogue operand loads before its stores: kTileStoreBatch, common.cuh), then with
# WsEpilogue's rows padded by 8 floats instead of 4 (conflict-free float2 writes of the
# accumulators). A/B/C against a7e471b (before / unroll / pad) in bf16 on KernelBench 12, 99, 84,
# 39, 33, in fp32 on 12, and the GEMM at K = 64 (12's file with --in 64); then the GPU tests of the
# stores' paths at the final code (pad).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s31/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.float32 if 'f_' in sys.argv[1] else torch.bfloat16)" $f & done; wait) > $OUT/b_build.log 2>&1
grep -iE "error" $OUT/b_build.log | head -5
t "K = 64"
timeout 90 python3 scripts/profile_forward.py $A/kb12k64_before.py $A/kb12k64_unroll.py $A/kb12k64_pad.py --dtype bf16 --iters 20 --eager 2>&1 | tee $OUT/b_k64.log | grep -E "ms  |^==|bf16\)" | cut -c1-110
t "A/B/C"
for n in 12 99 84 39 33; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_unroll.py $A/kb${n}_pad.py --dtype bf16 2>&1 | tail -4
done | tee $OUT/b_ab.log | cut -c1-160
timeout 80 python3 scripts/compare_forward.py .kb/level2/12_*.py $A/kb12f_before.py $A/kb12f_unroll.py $A/kb12f_pad.py 2>&1 | tail -4 | tee -a $OUT/b_ab.log | cut -c1-160
t "gpu tests"
KGEN_TEST_REFS=mul_leakyrelu,swish_scale,scale_residual,bn_gelu,gelu_softmax,groupnorm_hardtanh timeout 200 python3 -m pytest -m gpu -q -rfEx \
  tests/test_refs_gpu.py tests/test_half_gpu.py tests/test_skinny_gpu.py > $OUT/b_gpu_tests.log 2>&1
echo "exit $?"; tail -6 $OUT/b_gpu_tests.log | cut -c1-300
t done
