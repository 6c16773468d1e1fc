# Session 45, call A: wgmma fp16 (fp16 products of fp32 operands: the round16 GEMM on fp16's wgmma
# instructions, TF32's 11 significant bits at bf16's rate) against wgmma bf16, the cuBLAS TF32 file
# and eager (fp32, TF32, bf16 autocast), errors vs fp64 beside; the round16 GPU tests (fp16's cases
# and bf16's at KernelBench's shape).
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/v
for n in 12 39 33 30; do
  ref=$(ls .kb/level2/${n}_*.py)
  kgen generate $ref --backend wgmma --math bf16 -o /tmp/v/k${n}_fp32_wgmma_bf16.py --force > /dev/null
  kgen generate $ref --backend wgmma --math fp16 -o /tmp/v/k${n}_fp32_wgmma_f16.py --force > /dev/null
done
kgen generate .kb/level2/12_Gemm_Multiply_LeakyReLU.py --backend cublas --math tf32 -o /tmp/v/k12_fp32_cublas_tf32.py --force > /dev/null
t "build"
build_files /tmp/v a_build.log
t "A/B"
for n in 12 39 33 30; do
  timeout 75 python3 docs/experiments/s44/relaxed_ab.py $(ls .kb/level2/${n}_*.py) $(ls /tmp/v/k${n}_*.py) > $OUT/a_ab_kb$n.log 2>&1
  cut -c1-160 $OUT/a_ab_kb$n.log
done
t "tests"
gpu_tests a_gpu_round16.log 240 tests/test_wgmma_round16_gpu.py -k "fp16 or 1024-8192-8192"
t "end"
