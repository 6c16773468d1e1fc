# One device call (logs under $OUT): the sum chain's matrix-vector rewrite, files OLD V1 V2
# (before the 16-byte loads, with them, and with the shift sum folded into the merge kernel):
# per-kernel profile, timed in one process against eager, full validation of V2 at 1e-4;
# `kgen search` of the module at 1e-4.
. scripts/device_setup.sh
REF=tests/refs/gemm_sum_max_mean_lse.py
t "sum chain: build"
for f in $OLD $V1 $V2; do (timeout 120 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "sum chain: profile"
timeout 100 python3 scripts/profile_forward.py $OLD $V2 --iters 20 2>&1 | tee $OUT/sum_chain_profile.log | tail -14
t "sum chain: compare"
timeout 150 python3 scripts/compare_forward.py $REF $OLD $V1 $V2 2>&1 | tee $OUT/sum_chain_compare.log | tail -5
t "sum chain: validate"
timeout 150 python3 -m kgen.cli validate $V2 --tol 1e-4 > $OUT/sum_chain_validate.log 2>&1; tail -17 $OUT/sum_chain_validate.log
t "sum chain: search"
timeout 200 python3 -m kgen.cli search $REF --tol 1e-4 --math tf32x3 --top 2 > $OUT/sum_chain_search.log 2>&1
grep -E "fastest|winner|wrote|no candidate|FAIL|full validation" $OUT/sum_chain_search.log | tail -8
t done
