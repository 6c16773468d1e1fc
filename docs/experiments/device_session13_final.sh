# Session 13's last device call: KernelBench 68's file from session 11 (2ddf79a) against today's,
# interleaved (the fp32 all-36 run's bench had it at 0.612x eager where KernelBench's own timing
# of it improved), then KernelBench's eval at bf16 on all 36 files. Carry .kb.
. scripts/device_setup.sh
for f in s13cmp/k68_*.py; do (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "68: session 11's file against today's"
timeout 150 python3 scripts/compare_forward.py .kb/level2/68_Matmul_Min_Subtract.py s13cmp/k68_s11.py s13cmp/k68_now.py 2>&1 | tail -6
PRECISIONS=bf16 EVAL_LIMIT=330 bash scripts/device_kernelbench.sh 2>&1 | grep -v '^NVIDIA'
