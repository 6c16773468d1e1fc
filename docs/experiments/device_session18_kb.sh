# Session 18: kgen search of KernelBench 18 (its eager fp32 is 2.0e-4 from fp64, past
# KernelBench's 1e-4: the search prefers a candidate its eval accepts), its record and file
# copied to $OUT, then KernelBench's eval at fp32 on all 36 files (scripts/device_kernelbench.sh;
# 18's file from the new record). Carry .kb (KernelBench).
. scripts/device_setup.sh
t "search 18"
timeout 200 kgen search .kb/level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py --tol 1e-4 > $OUT/search_18.log 2>&1; tail -25 $OUT/search_18.log
cp results/search_18_* $OUT/ 2>/dev/null; cp generated/18_* $OUT/ 2>/dev/null
t "kernelbench"
PRECISIONS=fp32 EVAL_LIMIT=480 bash scripts/device_kernelbench.sh
