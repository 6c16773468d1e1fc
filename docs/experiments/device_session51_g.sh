# Session 51, call G: KernelBench's own eval at fp32 on 12 and 55 at the session's last kernel code
# (the GEMM takes w in registers only where it is handed no split: the default path unchanged).
NUMS="12 55" PRECISIONS=fp32 EVAL_LIMIT=80 bash scripts/device_kernelbench.sh 2>&1 | tail -6
