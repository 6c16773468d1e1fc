# Session 61, call A (nvidia-h200): KernelBench's eval at fp16 on all 36 files as published, alone on
# an idle GPU (session 60's call C ran it beside bf16; call F ran bf16 alone), then kgen validate of
# modules using the trace changes made after session 60's call C: settings read through a config
# object, a dict and a dataclass with unbound torch.Tensor methods (docs/experiments/s61/config_ref.py),
# and (W @ x.T).T after the review's view mends (docs/experiments/s60/transposed_ref.py), each in
# fp32 and bf16 (files from `kgen generate REF --dtype D`, carried in .kgen_work/v61).
. scripts/device_setup.sh
PRECISIONS=fp16 EVAL_LIMIT=400 bash scripts/device_kernelbench.sh > $OUT/kb_fp16_run.txt 2>&1
grep -E "correct under|^--- t" $OUT/kb_fp16_run.txt | tail -4; grep -iE "fail" $OUT/kb_all_fp16_table.md | head
for m in config_fp32:fp32 config_bf16:bf16 transposed_fp32:fp32 transposed_bf16:bf16; do
  timeout 100 kgen validate .kgen_work/v61/${m%:*}.py --dtype ${m#*:} 2>&1 | grep -v "^  " > $OUT/validate_${m%:*}.log
  echo "${m%:*}: $(tail -1 $OUT/validate_${m%:*}.log)"; grep -E "^FAIL" $OUT/validate_${m%:*}.log | cut -c1-300
done
t done
