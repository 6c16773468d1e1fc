# Session 11, seventh device call: the forward's host path before the kernels launch, shortened
# (the workspace size asked once per shape, no calls that return their argument unchanged,
# BatchNorm's batch count after the launch where the kernels do not read it). Files of the
# template before and after (s11files/h<NUM>_{a_old,b_new}.py, untracked, carried) timed
# interleaved as KernelBench times (docs/experiments/s11/host_time.py); the BatchNorm GPU tests;
# KernelBench's eval at fp32 and bf16 on 33 and 84. Carry .kb (KernelBench).
. scripts/device_setup.sh
for f in s11files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for spec in "33 bf16" "33 fp32" "84 bf16" "84 fp32" "12 bf16"; do set -- $spec
  t "host time $1 $2"
  timeout 100 python3 docs/experiments/s11/host_time.py $(ls .kb/level2/${1}_*.py) --dtype $2 s11files/h${1}_*.py 2>&1 | tee $OUT/hostpath_$1_$2.log | sed -n '1,4p'
done
t "gpu tests"
timeout 300 python3 -m pytest -m gpu -q -n 4 tests/test_faults.py tests/test_custom_ops.py tests/test_gpu.py tests/test_refs_gpu.py \
  -k "num_batches or unmodified or compile or (odd_shape and wgmma and (bn or tf32x3-1))" > $OUT/hostpath_gpu_tests.log 2>&1; tail -3 $OUT/hostpath_gpu_tests.log
t "KernelBench eval"
NUMS="33 84" PRECISIONS="fp32 bf16" EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep "^|" | grep -v "^|---"
t done
