# Session 34, call D (issue 24): the epilogue's per-column operands read once a thread. Each thread
# of the shared-memory tile's stores (tile_store, tile_store_as) now takes the same columns in every
# row it takes, and parameters are read with __ldg, so the compiler keeps a column's operands
# across the rows (PTX of 37's 16-bit store loop: 187 -> 155 instructions per eight values, the
# 16 operand loads and the index arithmetic out of it). *_before at ad8927b, *_after with it:
# same bits (bf16; fp32 for 12 and 99), times, 37's GEMM instructions; the GPU tier.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s34/ab
build_files $A d_build.log
t "same bits"
for n in 37 12 45 99 56 62 9 18 14 22; do timeout 40 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2 | cut -c1-60; done
for n in 12 99; do timeout 60 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_fp32_before.py $A/kb${n}_fp32_after.py 2>&1 | tail -2 | cut -c1-60; done
t "A/B"
for n in 37 45 99 62 12 9 18 22 14 56; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
done
for n in 12 99; do timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_fp32_before.py $A/kb${n}_fp32_after.py 2>&1 | grep -E "ms  " | cut -c1-150; done
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb37_before.py $A/kb37_after.py $A/kb45_before.py $A/kb45_after.py --dtype bf16 2>&1 | grep -E "==|ms " | cut -c1-140
t "ncu 37"
timeout 90 ncu --kernel-name regex:wgmma_half --launch-skip 2 --launch-count 1 --section SpeedOfLight --section InstructionStats python3 scripts/profile_forward.py $A/kb37_after.py --dtype bf16 --iters 2 > $OUT/d_ncu37.txt 2>&1
grep -E "Duration|Elapsed Cycles|SM Throughput|Issued Instructions  " $OUT/d_ncu37.txt | head
t "GPU tier"
gpu_tests d_half.log 170 tests/test_half_gpu.py -k "forward_and_buffers"
gpu_tests d_refs.log 70 tests/test_refs_gpu.py -k odd_shape
gpu_tests d_backward.log 60 tests/test_backward_gpu.py -k "groupnorm or softmax or swish"
t done
