# Issue 10 (part) and issue 9's gap on one GPU, in one call; logs under $OUT.
#  1. GPU tier of tests/refs (GroupNorm, width-1 reductions, the matrix-vector rewrite included)
#  2. issue 8's 1e-4 winners of 33/39/84 (baseline/, from commit 8faa4a4) against today's
#     (generated/), interleaved with eager in one process
#  3. searches of the issue-10 modules at tol 1e-4, and their eager / torch.compile times
. scripts/device_setup.sh
t tests
timeout 300 python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
tail -8 $OUT/gpu_refs.log
t compare
for p in gemm_scale_bn_b1024_i8192_o8192 gemm_scale_bn_b16384_i4096_o4096; do
  timeout 100 python3 scripts/compare_forward.py kgen/refs/gemm_scale_bn.py baseline/${p}_tol0.0001.py generated/${p}_tol0.0001.py 2>&1 | tail -4
done
timeout 100 python3 scripts/compare_forward.py kgen/refs/gemm_bn_scale_softmax.py baseline/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py 2>&1 | tail -4
t searches
for r in ${REFS:-gemm_sum_max_mean_lse gemm_groupnorm_hardtanh gemm_bn_bias_div_swish}; do
  echo "=== $r"
  timeout 150 python3 -m kgen.cli search tests/refs/$r.py --tol 1e-4 --math tf32x3 --top 3 > $OUT/search_$r.log 2>&1
  grep -E "eval|fastest valid|no candidate|rewrite" $OUT/search_$r.log | tail -8
  f=$(ls generated/${r}_*tol0.0001.py 2>/dev/null | head -1)
  [ -n "$f" ] && timeout 120 python3 -m kgen.cli bench "$f" --compile 2>&1 | tail -6
  tar czf $OUT/results.tgz generated results
done
t done
