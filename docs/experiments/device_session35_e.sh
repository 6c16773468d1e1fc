# Session 35, call E: call D timed KernelBench 51's bf16 file (the matrix-vector rewrite) at
# 0.273 ms where its search and call C had 0.113-0.115 (fp16 in call D: 0.111). The same eval on
# 45, 51, 53 in bf16 again (call D's neighbours, one process), then 51's file against eager three
# times in a process of its own.
unset PYTHONDONTWRITEBYTECODE
NUMS="45 51 53" PRECISIONS=bf16 EVAL_LIMIT=150 bash scripts/device_kernelbench.sh
for i in 1 2 3; do
  python3 scripts/compare_forward.py .kb/level2/51_*.py /tmp/kbf_bf16/51_*.py --dtype bf16 2>&1 | tail -3 | head -2
done
cd $OUT && tar cf /tmp/e.tar * && rm -f * && mv /tmp/e.tar $OUT/e.tar
