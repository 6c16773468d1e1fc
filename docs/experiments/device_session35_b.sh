# Session 35, call B: the matrix-vector rewrite's 16-bit build (KernelBench 18 and 51 ran the
# whole GEMM in bf16: 0.212 and 0.509 ms on an H200, session 34), and the 16-bit refusal of a
# running buffer read on the way into its BatchNorm (call A: 9 of 20 checks failed in bf16).
# 1. The rewrite's GPU tests (forward vs fp64 with eager as the yardstick, K whole and odd, the
#    full gate in bf16 and fp16).
# 2. A running buffer read after its BatchNorm (which keeps the 16-bit builds): the full gate in
#    bf16 and fp16.
# 3. Cold searches in bf16 / fp16 of KernelBench 51 (where the rewrite should win) and 18 (where
#    KernelBench's comparison with eager should refuse it: eager bf16's row sums are ~0.25 from
#    the exact ones), their records kept for results/.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t gemv 16-bit GPU tests
gpu_tests gemv.log 240 tests/test_gemv_half.py
t "a running buffer read after its BatchNorm: the full gate in bf16 and fp16"
python3 -c "import tests.test_param_loads as m; open('/tmp/rma.py', 'w').write(m.REFERENCE.replace('BN', 'self.bn').replace('return self.bn(x + self.bn.running_mean)', 'return self.bn(x) + self.bn.running_mean'))"
python3 -m kgen.cli generate /tmp/rma.py -o /tmp/rma_new.py --force | tail -1
for d in bf16 fp16; do
  python3 -m kgen.cli validate /tmp/rma_new.py --dtype $d > $OUT/rma_$d.log 2>&1
  echo "$d: $(tail -1 $OUT/rma_$d.log)"; grep FAIL $OUT/rma_$d.log | cut -c1-250
done
mkdir -p $OUT/results
for job in "51 bf16" "51 fp16" "18 bf16"; do
  set -- $job
  t "search KernelBench $1 in $2 (cold)"
  ref=$(ls .kb/level2/$1_*.py)
  python3 -m kgen.cli search $ref --dtype $2 --results-dir $OUT/results --out-dir $OUT/win_$1_$2 > $OUT/search_$1_$2.log 2>&1
  echo "exit $?"; grep -E "winner|gemv|FAIL|failed" $OUT/search_$1_$2.log | cut -c1-300 | tail -8
done
t done
