# Session 6 (H100): kgen search --also-batch on the GPU. First a small module (tests/refs, 4096 wide:
# the tier's fastest re-measured at 128 and 7 rows, the winner validated at each), then KernelBench
# 30 (GroupNorm) searched at 1024 for 128 and 16384 too.
. scripts/device_setup.sh
t "search gemm_mul_leakyrelu 1024 (+128, 7)"
timeout 200 python3 -m kgen.cli search tests/refs/gemm_mul_leakyrelu.py --batch 1024 --in 4096 --out 4096 \
  --also-batch 128 --also-batch 7 --tol 1e-4 --math tf32x3 --top 3 --out-dir /tmp/ab/generated \
  --results-dir /tmp/ab/results > $OUT/also_batch_small.log 2>&1; echo "exit $?"
grep -vE "^  (build|eval) " $OUT/also_batch_small.log | cut -c1-220 | tail -22
t "search KernelBench 30 at 1024 (+128, 16384)"
timeout ${KB_LIMIT:-280} python3 -m kgen.cli search .kb/level2/30_Gemm_GroupNorm_Hardtanh.py --also-batch 128 \
  --also-batch 16384 --tol 1e-4 --math tf32x3 --top 3 --out-dir /tmp/ab/generated --results-dir /tmp/ab/results \
  > $OUT/also_batch_kb30.log 2>&1; echo "exit $?"
grep -vE "^  (build|eval) " $OUT/also_batch_kb30.log | cut -c1-220 | tail -22
grep -h "at batch" /tmp/ab/generated/*.py | head -6
t done
