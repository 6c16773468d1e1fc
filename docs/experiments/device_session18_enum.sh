# Session 18: kgen validate of the Enum / config probe module (docs/experiments/s18/refs/x01_*)
# after ModelNew took the reference's instances as its copy's (2bfa85b).
. scripts/device_setup.sh
kgen generate docs/experiments/s18/refs/x01_enum_arg_branch.py -o /tmp/x01.py --force > /dev/null
timeout 150 kgen validate /tmp/x01.py --ref docs/experiments/s18/refs/x01_enum_arg_branch.py > $OUT/validate_x01_after.log 2>&1; tail -3 $OUT/validate_x01_after.log
