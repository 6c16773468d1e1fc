# Issue 9's last condition on the H100: 33/39/84 with the BatchNorm fold "no slower than" issue
# 8's files. Re-search the shipped problems (both tiers; generated/ gets H100 winners), then time
# issue 8's 1e-4 files (baseline/, extracted from commit 8faa4a4) against the new ones and eager,
# interleaved in one process with the order alternating per round; logs under $OUT.
. scripts/device_setup.sh
run() { echo "=== $*"; timeout 170 python3 -m kgen.cli search "$@" 2>&1 | grep -v "^\s*$" | tail -25; tar czf $OUT/results.tgz generated results; }
t searches
{
run --problem gemm_scale_bn --tol 1e-4 --tol 1e-2
run --problem gemm_scale_bn --batch 16384 --in 4096 --out 4096 --tol 1e-4 --tol 1e-2
run --problem gemm_bn_scale_softmax --tol 1e-4 --tol 1e-2
} > $OUT/search.log 2>&1
grep -E "^===|fastest valid|no candidate|replaced|same variant" $OUT/search.log
t compare
for p in gemm_scale_bn_b1024_i8192_o8192 gemm_scale_bn_b16384_i4096_o4096; do
  timeout 120 python3 scripts/compare_forward.py kgen/refs/gemm_scale_bn.py baseline/${p}_tol0.0001.py generated/${p}_tol0.0001.py 2>&1 | tail -4
done
timeout 120 python3 scripts/compare_forward.py kgen/refs/gemm_bn_scale_softmax.py baseline/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py 2>&1 | tail -4
t done
