# Session 34, call B (issue 24): the 16-bit GEMM's ping-pong form (WgmmaPingPongHalfGemm: a
# persistent CTA an SM, two consumer warpgroups taking turns on 64 x 256 tiles, one's epilogue
# beside the other's mainloop). *_before at ad8927b (the cooperative kernel), *_after with it:
# the same bits (bf16), the times; its GPU test (the same bits as the cooperative kernel at shapes
# that wrap the stage ring across tiles); then the GPU tier session 33 left (the pooling-alone
# reference, GroupNorm and row modules in 16 bits, their backward), now over the ping-pong GEMM.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s34/ab
build_files $A b_build.log
t "same bits, ping-pong against the cooperative kernel"
for n in 37 12 45 99 56 62 9 18; do timeout 40 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2 | cut -c1-60; done
t "A/B"
for n in 37 12 45 99 56 62 9 18; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
done
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb37_before.py $A/kb37_after.py $A/kb45_after.py --dtype bf16 2>&1 | grep -E "==|ms " | cut -c1-140
t "GPU tests"
gpu_tests b_pingpong.log 150 tests/test_pingpong_gpu.py
R=softmax,lse,groupnorm,layernorm,sum,pool,normalize,swish,leakyrelu
KGEN_TEST_REFS=$R gpu_tests b_half.log 170 tests/test_half_gpu.py -k "forward_and_buffers or full_gate"
KGEN_TEST_REFS=$R gpu_tests b_refs.log 60 tests/test_refs_gpu.py -k odd_shape
t done
