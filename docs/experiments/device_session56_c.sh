# Session 56, call C: KernelBench's 36 files at shapes other than the published ones
# (scripts/kernelbench_shapes.py: batch 3-2051, K and N off the tiles' multiples), through
# kgen generate, build and KernelBench's eval at fp32 and bf16, with kgen's replay against fp64.
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > $OUT/shapes.txt
export REFS=/tmp/kb_odd PRECISIONS="fp32 bf16" EVAL_LIMIT=200
bash scripts/device_kernelbench.sh
