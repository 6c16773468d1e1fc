# Session 7, third call (H100): the training check's second run (a parameter the fp64 run moved too
# little gets its rate scaled) on KernelBench 30 at 128 rows, then session 6's --also-batch
# searches again (every candidate had failed full validation at 128 rows then: kinks, kinks.py).
. scripts/device_setup.sh >/dev/null
f=$OUT/kb30_b128.py
python3 -m kgen.cli generate .kb/level2/30_Gemm_GroupNorm_Hardtanh.py --batch 128 -o $f > /dev/null 2>&1
t "validate KernelBench 30 at 128"
timeout 200 python3 -m kgen.cli validate $f --batch 128 > $OUT/kb30_validate_128.log 2>&1; echo "exit $?"
grep -E "gradients|training|passed" $OUT/kb30_validate_128.log | cut -c1-400
bash docs/experiments/device_session6_also_batch.sh
