# Session 35, call D: KernelBench 51's searches in bf16 / fp16 at this code (their records go to
# results/, so that `kgen generate --dtype` takes them), then KernelBench's eval at bf16 and fp16 on
# all 36 files (one GPU, no max-autotune: no four-GPU host was lent). $OUT comes back as one tar
# (a call returns at most eight files).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
for d in bf16 fp16; do
  t "search KernelBench 51 in $d"
  python3 -m kgen.cli search .kb/level2/51_*.py --dtype $d --results-dir results --out-dir /tmp/win_51_$d > $OUT/search_51_$d.log 2>&1
  grep "fastest valid" $OUT/search_51_$d.log | cut -c1-220
  cp results/search_51_*_tol0.01_$d.json $OUT/
done
PRECISIONS="bf16 fp16" EVAL_LIMIT=200 bash scripts/device_kernelbench.sh
cd $OUT && tar cf /tmp/d.tar * && rm -f * && mv /tmp/d.tar $OUT/d.tar
