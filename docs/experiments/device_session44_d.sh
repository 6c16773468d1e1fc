# Session 44, call D: fp16x3's GEMM with w in registers reads w conflict-free too (x's split
# permutes k, ws_detail::kPermuteK): A/B against k's order on KernelBench 55 and 59 (128 x 32768 ->
# 32768, issue 25's 2.0 ms goal) and 33 at batch 128; the fp16x3 and bf16 GPU tests after the
# permutation moved to gemm_wgmma_ws.cuh.
source scripts/device_setup.sh
t "generate"
python3 docs/experiments/s44/f16x3_permute_files.py /tmp/p .kb/level2 55 59 33 > /dev/null
t "build"
build_files /tmp/p d_build.log
t "A/B"
for n in 55 59; do
  timeout 90 python3 scripts/compare_forward.py $(ls .kb/level2/${n}_*.py) /tmp/p/k${n}_fp32_order.py /tmp/p/k${n}_fp32_perm.py > $OUT/d_ab_kb$n.log 2>&1
  cat $OUT/d_ab_kb$n.log | cut -c1-160
done
for r in 1 2; do for v in order perm; do
  echo "== 33 at batch 128, $v, round $r"
  timeout 60 kgen bench /tmp/p/k33_fp32_$v.py --batch 128 --iters 50 2>&1 | tail -4
done; done > $OUT/d_bench33_b128.log
cut -c1-160 $OUT/d_bench33_b128.log
t "tests"
gpu_tests d_gpu_fp16x3.log 330 tests/test_fp16x3.py tests/test_split_k_gpu.py tests/test_wgmma_bf16_gpu.py
t "end"
