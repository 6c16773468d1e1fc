# Session 62, call C (nvidia-h200), at the merge of s62_pro (the prologue) over call B's merges:
# KernelBench's eval on all 36 files as published at fp32 and at bf16 (two processes, side by side),
# and beside them the prologue's GPU tests (tests/test_prologue_gpu.py) and what call B's limit cut:
# test_half_gpu's C++ node against the Python node, test_rows_input_gpu; then kgen validate of the
# pre-norm MLP block (docs/experiments/s62/prenorm_ref.py, .kgen_work/v62/prenorm.py) in fp32 and bf16.
. scripts/device_setup.sh
(PRECISIONS=fp32 EVAL_LIMIT=430 bash scripts/device_kernelbench.sh > $OUT/kb_fp32_run.txt 2>&1) &
(PRECISIONS=bf16 EVAL_LIMIT=430 bash scripts/device_kernelbench.sh > $OUT/kb_bf16_run.txt 2>&1) &
gpu_tests c.log 400 -n 4 tests/test_prologue_gpu.py tests/test_rows_input_gpu.py \
  "tests/test_half_gpu.py::test_the_cpp_node_gives_the_python_nodes_gradients"
for d in fp32 bf16; do timeout 60 kgen validate .kgen_work/v62/prenorm.py --dtype $d 2>&1 | grep -v "^  " > $OUT/validate_prenorm_$d.log; echo "prenorm $d: $(tail -1 $OUT/validate_prenorm_$d.log)"; grep "^FAIL" $OUT/validate_prenorm_$d.log | cut -c1-250; done
t tests done
wait
for p in fp32 bf16; do grep -E "correct under|^--- t" $OUT/kb_${p}_run.txt | tail -3; grep -ihE "fail|error" $OUT/kb_all_${p}_table.md | head -5; done
t done
