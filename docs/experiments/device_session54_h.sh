# Session 54, call H, at 594d3f6 (the last code commit): kgen validate on a module that moves
# itself to the GPU in __init__ after setting torch's default device at import, and on Linear ->
# F.normalize; KernelBench's eval at fp32 on 30, 76 and 99.
source scripts/device_setup.sh
mkdir -p $OUT
build_files ab/f7 builds.log
for r in cuda_init normalize_pad; do
  timeout 100 python3 -m kgen validate ab/f7/${r}_fp32.py > $OUT/validate_$r.log 2>&1; echo "validate $r: $?"; grep -E "FAIL|passed" $OUT/validate_$r.log | cut -c1-300
done
NUMS="30 76 99" PRECISIONS=fp32 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | tail -6
