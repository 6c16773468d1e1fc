# Session 60, call C (nvidia-h200): KernelBench's eval on all 36 files as published at fp16 (last
# run on all 36 in session 21) and at bf16 (after bc77bfe's bias rounding and the probes' kernel
# changes: an fmod / remainder divisor in the module's dtype, var / norm / rms_norm in fp32
# inside), both at once on the one GPU (their timings beside each other's: correctness is what
# this call is for); beside them kgen validate of session 60's modules: (W @ x.T).T in fp32 and
# bf16, an fp16 module's var / normalize / rms_norm at activations whose squares overflow fp16
# plus a remainder, a LayerScale (1, 1, N) parameter on a 3-d input in fp32 and bf16.
. scripts/device_setup.sh
(PRECISIONS=fp16 EVAL_LIMIT=430 bash scripts/device_kernelbench.sh > $OUT/kb_fp16_run.txt 2>&1) &
(PRECISIONS=bf16 EVAL_LIMIT=430 bash scripts/device_kernelbench.sh > $OUT/kb_bf16_run.txt 2>&1) &
(sleep 60
 for m in transposed_fp32:fp32 transposed_bf16:bf16 opmath_fp16:fp16 layerscale_fp32:fp32 layerscale_bf16:bf16; do
   timeout 150 kgen validate .kgen_work/v60/${m%:*}.py --dtype ${m#*:} 2>&1 | grep -v "^  " > $OUT/validate_${m%:*}.log
 done) &
wait
for p in fp16 bf16; do grep -E "correct under|^--- t" $OUT/kb_${p}_run.txt | tail -3; grep -E "FAIL|fail" $OUT/kb_all_${p}_table.md | head; done
for f in $OUT/validate_*.log; do echo "$(basename $f): $(tail -1 $f)"; grep -E "^FAIL" $f | cut -c1-300; done
t done
