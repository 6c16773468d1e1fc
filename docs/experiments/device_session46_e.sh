# Session 46, call E: per-kernel time of an fp32 module inside bf16 autocast, round16 on the fp32
# weight against the conversion and the half GEMM (docs/experiments/s46/autocast_kernels.py).
source scripts/device_setup.sh
t "kernels"
mkdir -p /tmp/ak
timeout 400 python3 docs/experiments/s46/autocast_kernels.py /tmp/ak .kb/level2/12_*.py .kb/level2/39_*.py .kb/level2/33_*.py > $OUT/e_kernels.log 2>&1; echo "exit $?"
grep -E "^==|us/call" $OUT/e_kernels.log | cut -c1-200
t "end"
