# Session 56, call B: KernelBench's eval at bf16 on all 36 files; then the usage probe's one-sample
# inputs (x_1d, e9f6397) on the five files.
export PRECISIONS=bf16 EVAL_LIMIT=300
export THEN="USAGE_DEADLINE=120 bash docs/experiments/device_session55_usage.sh --only 'x_1d*'"
bash scripts/device_kernelbench.sh
