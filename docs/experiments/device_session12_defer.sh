# Session 12, fourth device call: why a bf16 module with a costly point-wise chain (29: Mish,
# Mish) is slower than eager bf16 (0.389 against 0.230 ms in KernelBench's all-36 run) when its
# GEMM alone takes ~0.18 ms. Per-kernel GPU time of the default files of 29, 64, 18, 45 in bf16
# (scripts/profile_forward.py); then files whose chain runs in the GEMM's epilogue (d<NUM>_a_fused,
# today's lowering) against files whose GEMM stores the Linear's output and a point-wise kernel
# applies the chain (d<NUM>_b_defer, written with an experimental switch of the lowering, not
# committed; the static_assert that a point-wise part's epilogue makes the output deleted from
# them by sed, which only the kept-z forward of training needs), interleaved with eager bf16 (scripts/compare_forward.py --dtype bf16). Carry .kb.
. scripts/device_setup.sh
for f in s12files/d*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
done
mkdir -p /tmp/p; for n in ${PROFILE_NUMS:-64 18 45}; do python3 -m kgen generate $(ls .kb/level2/${n}_*.py) --dtype bf16 -o /tmp/p/p$n.py --force > /dev/null; done
wait
t "profile (bf16, no grad)"
timeout 150 python3 scripts/profile_forward.py s12files/d29_a_fused.py s12files/d29_b_defer.py $(ls /tmp/p/p*.py) --dtype bf16 --eager > $OUT/defer_profile.log 2>&1; grep "==\|ms " $OUT/defer_profile.log | head -60
for n in 29 81 86 95 53 12; do
  t "fused vs deferred chain, $n bf16"
  timeout 60 python3 scripts/compare_forward.py $(ls .kb/level2/${n}_*.py) s12files/d${n}_a_fused.py s12files/d${n}_b_defer.py --dtype bf16 2>&1 | tee $OUT/defer_$n.log | cut -c1-110 | head -3
done
t done
