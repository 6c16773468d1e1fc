# Session 61, call C (nvidia-h200): after call B's mends (glu rounded once; the checks give a forward
# that reads its input's leading sizes the rows as one sample; the training-refused check reads
# RReLU's message): tests/test_glu_gpu.py and tests/test_spellings_probe61_views_gpu.py again; kgen
# validate of a module of two inputs (HuggingFace's BertOutput, docs/experiments/s61/bert_output_ref.py)
# and a SwiGLU plus a residual passed in (swiglu_residual_ref.py), each generated with --dtype fp32 and
# bf16 (carried in .kgen_work/v61c); KernelBench's eval on all 36 at fp32 and at bf16 (at once, with
# the tests: correctness, not timing) after the session's merges.
. scripts/device_setup.sh
(PRECISIONS=fp32 EVAL_LIMIT=420 bash scripts/device_kernelbench.sh > $OUT/kb_fp32_run.txt 2>&1) &
(PRECISIONS=bf16 EVAL_LIMIT=420 bash scripts/device_kernelbench.sh > $OUT/kb_bf16_run.txt 2>&1) &
(gpu_tests again.log 400 -n 6 tests/test_glu_gpu.py tests/test_spellings_probe61_views_gpu.py > $OUT/again_summary.txt 2>&1) &
(sleep 30
 for m in bert_output_fp32:fp32 bert_output_bf16:bf16 swiglu_residual_fp32:fp32 swiglu_residual_bf16:bf16; do
   timeout 120 kgen validate .kgen_work/v61c/${m%:*}.py --dtype ${m#*:} 2>&1 | grep -v "^  " > $OUT/validate_${m%:*}.log
 done) &
wait
cat $OUT/again_summary.txt
for p in fp32 bf16; do grep -E "correct under|^--- t" $OUT/kb_${p}_run.txt | tail -2; grep -E "FAIL|fail|error" $OUT/kb_all_${p}_table.md | head -5; done
for f in $OUT/validate_*.log; do echo "$(basename $f): $(tail -1 $f)"; grep -E "^FAIL" $f | cut -c1-300; done
t done
