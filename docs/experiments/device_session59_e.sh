# Session 59, call E (nvidia-h200-x2): KernelBench's 36 files respelled as others write them (each
# by a seeded combination of 3-6 of tests/kernelbench_respell.py's axes, at 256 x 1024 -> 1024:
# docs/experiments/s59/respelled_corpus.py, written to .kgen_work/kb_respelled), through
# `kgen generate --dtype` and KernelBench's eval at fp32 and bf16, dealt over both GPUs; and kgen
# validate of Gemma's RMSNorm in bf16 (a98d587: its weight upcast).
. scripts/device_setup.sh
(CUDA_VISIBLE_DEVICES=1 timeout 150 kgen validate .kgen_work/v59b/upcast_gemma.py --dtype bf16 2>&1 | grep -v "^  " > $OUT/gemma.log) &
REFS=.kgen_work/kb_respelled PRECISIONS="fp32 bf16" GPUS=2 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | grep -v "| correct |" | tail -20
wait
cat $OUT/gemma.log | cut -c1-200
t done
