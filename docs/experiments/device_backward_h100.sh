# The backward kernels on one GPU (logs under $OUT): their GPU tests (gradients against fp64
# with eager fp32's error beside them, on both GEMM families; SGD steps), the custom ops' GPU
# tests, then one training step's time (forward + backward) of the point-wise module
# gemm_mul_leakyrelu at 1024 x 8192 -> 8192 (and of MODULES, ref:batch:in:out) against eager.
. scripts/device_setup.sh
t "backward tests"
timeout 240 python3 -m pytest -m gpu -q -rA tests/test_backward_gpu.py tests/test_custom_ops.py > $OUT/gpu_backward.log 2>&1
grep -E "passed|failed|PASSED|FAILED|kgen .*eager fp32" $OUT/gpu_backward.log | tail -30
grep -E "^E " $OUT/gpu_backward.log | head -20
for m in ${MODULES:-gemm_mul_leakyrelu:1024:8192:8192}; do
  IFS=: read r b i o <<< "$m"
  t "training step $r $b x $i -> $o"
  timeout 120 python3 -m kgen.cli generate tests/refs/$r.py --batch $b --in $i --out $o --backend wgmma --math tf32x3 --tile 128x128x32 --warp 16x128 --stages 4 --group 8 --fusion 1 -o $OUT/${r}.py > /dev/null
  timeout 200 python3 scripts/bench_training.py tests/refs/$r.py $OUT/${r}.py 2>&1 | tee $OUT/training_${r}.log
done
t done
