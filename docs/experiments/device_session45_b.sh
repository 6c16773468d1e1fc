# Session 45, call B: `kgen search` in the 1e-2 tier with tf32, bf16 and fp16 candidates (KernelBench
# 12, 33, 39, 30: where bf16's rounding misses 1e-2 on torch.randn, fp16 products keep TF32's bits);
# Nsight Compute on the round16 GEMM kernel in bf16 and fp16 (KernelBench 12): time and SM clock
# (call A measured fp16 8-10 % slower than bf16 on the same kernel and instruction rate).
source scripts/device_setup.sh
t "ncu"
mkdir -p /tmp/v
for m in bf16 fp16; do
  kgen generate .kb/level2/12_Gemm_Multiply_LeakyReLU.py --backend wgmma --math $m -o /tmp/v/k12_$m.py --force > /dev/null
  python3 -c "from kgen.check.loading import EmittedFile; import torch; EmittedFile('/tmp/v/k12_$m.py').build(torch.float32)" > /dev/null 2>&1
  timeout 60 ncu --clock-control none -k regex:"wgmma_round16_kernel" --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 -m kgen.cli bench /tmp/v/k12_$m.py --iters 10 > $OUT/b_ncu_$m.txt 2>&1
  echo "$m:"; grep -E "duration|per_second|cycles_elapsed.max|gmma" $OUT/b_ncu_$m.txt | head -12
done
for n in 12 33 39 30; do
  t "search $n"
  timeout 105 kgen search $(ls .kb/level2/${n}_*.py) --tol 1e-2 --math tf32 --math bf16 --math fp16 \
    --out-dir $OUT/b_search$n --results-dir $OUT/b_search$n > $OUT/b_search$n.log 2>&1
  echo "search exit $?"; grep -E "probe|passed|failed|fastest valid|dropped|winner" $OUT/b_search$n.log | cut -c1-170 | head -16
done
t "end"
