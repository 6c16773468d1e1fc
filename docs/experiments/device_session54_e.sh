# Session 54, call E: why the training check fails at 2048 x 1024 -> 32 on 64x64 fp16x3 tiles
# (s54/training_flips.py: each step's sign flips against fp64, masked or not, the file's and
# eager's); the gate on a ParameterList module (its reads by getattr, merged this session).
source scripts/device_setup.sh
mkdir -p $OUT
t build
build_files ab/t builds.log
t flips
timeout 200 python3 docs/experiments/s54/training_flips.py ab/t/2048_1024_32_fp32.py > $OUT/flips.log 2>&1; head -3 $OUT/flips.log | cut -c1-400; grep -c unmasked $OUT/flips.log
t validate
timeout 100 python3 -m kgen validate ab/t/plist_fp32.py > $OUT/validate_plist.log 2>&1; echo "validate plist: $?"; tail -1 $OUT/validate_plist.log
t done
