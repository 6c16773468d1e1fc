# One device call (logs under $OUT): the sum chain's rewrite, files OLD V3 V4 (V4: the shift
# sum's loads unrolled) profiled and timed in one process against eager, V4's full validation
# and bench; then issue 10's other modules (FILES: emitted at KernelBench's shapes with the
# search's winning variants), each fully validated at 1e-4 (KernelBench's eval included) and
# timed against eager fp32 and torch.compile in one run.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=.
start=$(date +%s)
L=$OUT/logs; mkdir -p $L
t() { echo "--- t=$(( $(date +%s) - start ))s: $*"; }
REF=tests/refs/gemm_sum_max_mean_lse.py
t "build"
for f in $OLD $V3 $V4 $FILES; do (timeout 150 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "sum chain: profile, compare"
timeout 60 python3 scripts/profile_forward.py $V4 --iters 20 2>&1 | tee $L/sum_chain_profile.log | tail -4
timeout 150 python3 scripts/compare_forward.py $REF $OLD $V3 $V4 2>&1 | tee $L/sum_chain_compare.log | tail -5
t "sum chain: validate, bench"
timeout 100 python3 -m kgen.cli validate $V4 --tol 1e-4 > $L/validate_sum_chain.log 2>&1; tail -1 $L/validate_sum_chain.log
timeout 100 python3 -m kgen.cli bench $V4 --compile 2>&1 | tee $L/bench_sum_chain.log | tail -6
for f in $FILES; do
  n=$(basename $f .py)
  t "$n: validate, bench"
  timeout 120 python3 -m kgen.cli validate $f --tol 1e-4 > $L/validate_$n.log 2>&1; grep -E "FAIL|KernelBench's eval|passed," $L/validate_$n.log
  timeout 80 python3 -m kgen.cli bench $f --compile > $L/bench_$n.log 2>&1; grep -E "^(ModelNew|eager|torch.compile)" $L/bench_$n.log
done
t done
tar czf $OUT/logs.tgz -C $OUT logs && rm -r $L
