# Session 51, call B: KernelBench's own eval at fp32 on all 36 of its level-2 GEMM files at session
# 50's code (7c6c46c: w's fp16x3 split kept from call to call), the first at fp32 on all 36 since
# session 23's H100 run (fp16x3, split-K, the kept z and the kept split came after).
PRECISIONS=fp32 EVAL_LIMIT=330 bash scripts/device_kernelbench.sh 2>&1 | tail -45
