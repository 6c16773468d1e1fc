# One device call (logs under $OUT): the sum chain's matrix-vector rewrite, files OLD V2 V3
# (V3: the column-sum merge split 4 ways per column) profiled and timed in one process against
# eager, V3's full validation and `kgen bench --compile`; the rewrite's GPU tests; then the
# shipped problems' tier and the planted faults (their full validations now replay KernelBench's eval).
. scripts/device_setup.sh
REF=tests/refs/gemm_sum_max_mean_lse.py
t "sum chain: build"
for f in $OLD $V2 $V3; do (timeout 120 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "sum chain: profile"
timeout 100 python3 scripts/profile_forward.py $V3 --iters 20 2>&1 | tee $OUT/sum_chain_profile.log | tail -4
t "sum chain: compare"
timeout 150 python3 scripts/compare_forward.py $REF $OLD $V2 $V3 2>&1 | tee $OUT/sum_chain_compare.log | tail -5
t "sum chain: validate, bench"
timeout 150 python3 -m kgen.cli validate $V3 --tol 1e-4 > $OUT/sum_chain_validate.log 2>&1; tail -1 $OUT/sum_chain_validate.log
timeout 100 python3 -m kgen.cli bench $V3 --compile 2>&1 | tee $OUT/sum_chain_bench.log | tail -6
t "rewrite GPU tests"
timeout 150 python3 -m pytest -m gpu -q tests/test_refs_gpu.py -k matrix_vector > $OUT/gpu_gemv.log 2>&1; tail -2 $OUT/gpu_gemv.log
t shipped
timeout ${SHIPPED_LIMIT:-280} python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_faults.py > $OUT/gpu_shipped.log 2>&1
tail -8 $OUT/gpu_shipped.log
t done
