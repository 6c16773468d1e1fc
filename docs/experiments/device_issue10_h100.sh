# Issue 10's modules on one GPU (logs under $OUT): `kgen search REF --tol 1e-4` for each module
# named in REFS (tests/refs/), then `kgen bench --compile` of the winner (eager fp32 and
# torch.compile in the same run); with COMPARE=1, issue 8's files of 33/39/84 (baseline/, from
# commit 8faa4a4) against today's (generated/), each timed right after eager.
. scripts/device_setup.sh
for r in $REFS; do
  t "search $r"
  timeout 170 python3 -m kgen.cli search tests/refs/$r.py --tol 1e-4 --math tf32x3 --top ${TOP:-2} > $OUT/search_$r.log 2>&1
  grep -E "fastest valid|no candidate|rewrite|FAIL" $OUT/search_$r.log | tail -6
  f=$(ls generated/${r}_*tol0.0001.py 2>/dev/null | head -1)
  [ -n "$f" ] && timeout 150 python3 -m kgen.cli bench "$f" --compile > $OUT/bench_$r.log 2>&1
  [ -n "$f" ] && tail -6 $OUT/bench_$r.log
  tar czf $OUT/results.tgz generated results
done
if [ -n "${COMPARE:-}" ]; then
  t compare
  for p in gemm_scale_bn_b1024_i8192_o8192 gemm_scale_bn_b16384_i4096_o4096; do
    timeout 150 python3 scripts/compare_forward.py kgen/refs/gemm_scale_bn.py baseline/${p}_tol0.0001.py generated/${p}_tol0.0001.py 2>&1 | tail -4
  done
  timeout 150 python3 scripts/compare_forward.py kgen/refs/gemm_bn_scale_softmax.py baseline/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py 2>&1 | tail -4
fi
t done
