# Session 59, call F (nvidia-h200-x2): the control of call E: KernelBench's 36 files as published
# but at call E's shape (256 x 1024 -> 1024, only the size constants changed: .kgen_work/kb_shrunk),
# KernelBench's eval at fp32 and bf16: which of call E's failures the shape makes, not the spelling.
. scripts/device_setup.sh
REFS=.kgen_work/kb_shrunk PRECISIONS="fp32 bf16" GPUS=2 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | grep -v "| correct |" | tail -20
t done
