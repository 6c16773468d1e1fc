# Session 29, call G (issue 24): KernelBench 66 and 68 in bf16 kernel by kernel against eager bf16
# (split-K took 68 from 0.191 to 0.187 ms and left 66 at 0.219: where their time goes).
unset PYTHONDONTWRITEBYTECODE
A=docs/experiments/s29/ab
. scripts/device_setup.sh
for f in $A/kb66_after.py $A/kb68_after.py; do timeout 80 python3 scripts/profile_forward.py $f --dtype bf16 --eager; done > $OUT/g_profile.log 2>&1
grep -E "==|ms  " $OUT/g_profile.log | cut -c1-140
t done
