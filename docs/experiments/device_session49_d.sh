# Session 49, call D: KernelBench's own eval at bf16 on its 14 files with a point-wise part (the
# parts whose training forward now keeps z in the GEMM's epilogue), at c536be1. Run as
#   NUMS="12 29 40 45 53 59 63 68 70 76 81 86 9 95" PRECISIONS=bf16 EVAL_LIMIT=170 bash scripts/device_kernelbench.sh
NUMS="12 29 40 45 53 59 63 68 70 76 81 86 9 95" PRECISIONS=bf16 EVAL_LIMIT=170 bash scripts/device_kernelbench.sh
