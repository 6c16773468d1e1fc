# Session 34, call C (issue 24): the ping-pong 16-bit GEMM with 128 x 128 tiles a warpgroup (two
# m64n128 row blocks; 32 KB stages, 6 of them). Call B's 64 x 256 tiles were slower everywhere
# (37 0.795 -> 1.199 ms of GEMM, 12 0.219 -> 0.239 ms): a 64-row tile reads 40 KB a k-tile for
# half the products of the cooperative kernel's 48 KB, and one warpgroup's epilogue on its own
# registers (4 warps, one a scheduler) hides no latency. *_before at ad8927b (cooperative),
# *_after with 128 x 128 ping-pong: same bits, times, the tensor pipe on 12, the GPU test.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s34/ab
build_files $A c_build.log
t "same bits, ping-pong 128 x 128 against the cooperative kernel"
for n in 37 12 45 99 56 62 9 18 14 22; do timeout 40 python3 docs/experiments/s32/same_bits.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -2 | cut -c1-60; done
t "A/B"
for n in 12 9 99 18 14 22 56 62 45 37; do
  timeout 40 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | grep -E "ms  " | cut -c1-150
done
t "kernels"
timeout 60 python3 scripts/profile_forward.py $A/kb12_before.py $A/kb12_after.py $A/kb37_after.py --dtype bf16 2>&1 | grep -E "==|ms " | cut -c1-140
t "ncu 12"
timeout 90 ncu --kernel-name regex:wgmma_ --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats python3 scripts/profile_forward.py $A/kb12_after.py --dtype bf16 --iters 2 > $OUT/c_ncu12.txt 2>&1
grep -E "Duration|Elapsed Cycles|SM Throughput|L2 Cache Th|L1/TEX Cache Th|Warp Cycles Per Issued" $OUT/c_ncu12.txt | head
t "GPU test"
gpu_tests c_pingpong.log 150 tests/test_pingpong_gpu.py
t done
