# Session 63, call B (nvidia-h200), at ad392a2: what call A's limit cut (the gemv row-sum rewrite in
# 16 bits: test_gemv_half, test_eager_sum_gpu, test_half_semantics_gpu, test_gemv_backward) and,
# beside them, KernelBench's eval on all 36 files as published at fp32 and at bf16 (session 62's
# were before pside's merge and ad392a2's mends).
. scripts/device_setup.sh
(PRECISIONS=fp32 EVAL_LIMIT=440 bash scripts/device_kernelbench.sh > $OUT/kb_fp32_run.txt 2>&1) &
(PRECISIONS=bf16 EVAL_LIMIT=440 bash scripts/device_kernelbench.sh > $OUT/kb_bf16_run.txt 2>&1) &
gpu_tests b.log 420 -n 4 tests/test_gemv_half.py tests/test_eager_sum_gpu.py tests/test_half_semantics_gpu.py \
  tests/test_gemv_backward.py
t tests done
wait
for p in fp32 bf16; do grep -E "correct under|^--- t" $OUT/kb_${p}_run.txt | tail -3; grep -ihE "fail|error" $OUT/kb_all_${p}_table.md | head -5; done
t done
