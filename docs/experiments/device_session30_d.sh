# Session 30, call D (issue 24): where the 16-bit GEMM's idle ~25 % goes at 1024 x K -> 8192 (call C:
# its tensor pipe busy for exactly the products' cycles, idle 59 K cycles per SM while active,
# cuBLAS ~17 K). Kernel time at K = 2048 ... 16384 (256 tiles each, 2 waves): the intercept is the
# per-tile cost (prologue, pipeline fill, epilogue), the slope the mainloop's rate; cuBLAS beside.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
for k in 2048 4096 16384; do timeout 120 python3 scripts/profile_forward.py $A/kb12_k$k.py --dtype bf16 --eager --iters 20; done > $OUT/d_profile.log 2>&1
timeout 120 python3 scripts/profile_forward.py $A/kb12_after.py --dtype bf16 --eager --iters 20 >> $OUT/d_profile.log 2>&1
grep -E "==|ms  " $OUT/d_profile.log | cut -c1-140
t done
