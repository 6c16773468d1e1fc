# Session 45, call F: the round16 GEMM's CTA of one tile (Narrow: 128 rows of x, 4 stages) at
# batches of at most 128 rows, where the CTA of two tiles left half its rows past the batch and
# cuBLAS BF16 won the 1e-2 tier (KernelBench 55, 56, 59, 66, 68; call C/E): its GPU tests (128 and
# 100 rows, bf16 and fp16), the A/B against cuBLAS BF16 and eager, and the 1e-2 search of 68.
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/v
for n in 55 68; do
  ref=$(ls .kb/level2/${n}_*.py)
  kgen generate $ref --backend wgmma --math bf16 -o /tmp/v/k${n}_fp32_wgmma_bf16.py --force > /dev/null
  kgen generate $ref --backend wgmma --math fp16 -o /tmp/v/k${n}_fp32_wgmma_f16.py --force > /dev/null
  kgen generate $ref --backend cublas --math bf16 -o /tmp/v/k${n}_fp32_cublas_bf16.py --force > /dev/null
done
t "build"
build_files /tmp/v f_build.log
t "A/B"
for n in 55 68; do
  timeout 75 python3 docs/experiments/s44/relaxed_ab.py $(ls .kb/level2/${n}_*.py) $(ls /tmp/v/k${n}_*.py) > $OUT/f_ab_kb$n.log 2>&1
  cut -c1-160 $OUT/f_ab_kb$n.log
done
t "tests"
gpu_tests f_gpu_round16.log 200 tests/test_wgmma_round16_gpu.py -k "128-1000-1000 or 100-264-300 or (bf16 and 1024-8192-8192)"
t "search 68"
timeout 60 kgen search .kb/level2/68_Matmul_Min_Subtract.py --tol 1e-2 --math tf32 --math bf16 --math fp16 \
  --out-dir $OUT/f_search68 --results-dir $OUT/f_search68 > $OUT/f_search68.log 2>&1
echo "search exit $?"; grep -E "^passed|fastest valid" $OUT/f_search68.log | cut -c1-170
t "end"
