# Session 62, call B (nvidia-h200), at the merges of s62_tok, s62_ext, s62_side and s62_half: their
# GPU tests (one-token heads, every input's gradient, Linears side by side, 16-bit add-with-alpha /
# addcmul / the backward's comparisons / the gated LayerNorm / InstanceNorm affine), the tiers the
# d_input change touches (test_backward_gpu, test_half_gpu's C++ node, test_rows_input_gpu,
# test_kernelbench_autocast_gpu) and test_glu_gpu, 8 pytest workers on the one GPU; beside them,
# kgen validate of the session's modules written as others write them (docs/experiments/s62, files in
# .kgen_work/v62) in fp32 and in bf16 (call A ran its "bf16" files in fp32: no --dtype).
. scripts/device_setup.sh
(for f in .kgen_work/v62/*.py; do for d in fp32 bf16; do echo "$f $d"; done; done | xargs -P 3 -n 2 sh -c \
  'b=$(basename $0 .py)_$1; timeout 200 kgen validate $0 --dtype $1 2>&1 | grep -v "^  " > $OUT/validate_$b.log; echo "$b: $(tail -1 $OUT/validate_$b.log)"' > $OUT/validate_summary.txt 2>&1) &
gpu_tests b.log 440 -n 8 tests/test_token_select_gpu.py tests/test_second_input_gpu.py tests/test_side_by_side_gpu.py \
  tests/test_half_semantics_gpu.py tests/test_glu_gpu.py tests/test_backward_gpu.py tests/test_rows_input_gpu.py \
  tests/test_kernelbench_autocast_gpu.py "tests/test_half_gpu.py::test_the_cpp_node_gives_the_python_nodes_gradients"
t tests done
wait
cat $OUT/validate_summary.txt; grep -h "^FAIL" $OUT/validate_*.log | cut -c1-250 | head -20
t done
