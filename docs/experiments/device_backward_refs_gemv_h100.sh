# One device call (logs under $OUT): the backward GPU tests on this tree (the last session's
# review fixes never ran on a GPU), the matrix-vector rewrite of the sum chain (KB 18) before
# and after its 16-byte loads (OLD, NEW: emitted files), timed in one process against eager with
# its error vs fp64, KernelBench's eval procedure and the full validation, then the GPU tier of
# tests/refs/ (REFS_LIMIT seconds).
. scripts/device_setup.sh
t "backward tests"
timeout 240 python3 -m pytest -m gpu -q -rA tests/test_backward_gpu.py tests/test_custom_ops.py > $OUT/gpu_backward.log 2>&1
tail -1 $OUT/gpu_backward.log; grep -E "^(FAILED|ERROR)|^E " $OUT/gpu_backward.log | head -20
t "sum chain: build"
REF=tests/refs/gemm_sum_max_mean_lse.py
for f in $OLD $NEW; do (timeout 120 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "sum chain: compare"
timeout 150 python3 scripts/compare_forward.py $REF $OLD $NEW 2>&1 | tee $OUT/sum_chain_compare.log | tail -4
t "sum chain: validate 1e-4 / 1e-2"
timeout 150 python3 -m kgen.cli validate $NEW --tol 1e-4 > $OUT/sum_chain_validate.log 2>&1; tail -22 $OUT/sum_chain_validate.log
timeout 100 python3 -m kgen.cli validate $NEW --tol 1e-2 > $OUT/sum_chain_validate_1e-2.log 2>&1; tail -2 $OUT/sum_chain_validate_1e-2.log
t "sum chain: bench --compile"
timeout 100 python3 -m kgen.cli bench $NEW --compile 2>&1 | tee $OUT/sum_chain_bench.log | tail -6
t refs
timeout ${REFS_LIMIT:-200} python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
tail -8 $OUT/gpu_refs.log
t done
