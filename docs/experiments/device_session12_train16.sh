# Session 12: a bf16 / fp16 module's backward with dx = dz w and dw = dz^T x on torch's GEMM in the
# module's dtype (kgen's kernels still compute dz and the parameters' gradients), where it ran
# kgen's fp32 3xTF32 GEMMs on fp32 copies of x and w. One training step, files of the template
# before (s12files/t<NUM>_a_old.py) and after (t<NUM>_b_new.py) against eager bf16
# (docs/experiments/s12/train16.py); then the 16-bit GPU tests (gradients against fp64 with
# eager's error as the yardstick, the full gate) and the fp32 backward's. Carry .kb.
. scripts/device_setup.sh
for f in s12files/t*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for n in 33 12 29; do
  t "training step $n bf16"
  timeout 120 python3 docs/experiments/s12/train16.py $(ls .kb/level2/${n}_*.py) s12files/t${n}_a_old.py s12files/t${n}_b_new.py 2>&1 | tee -a $OUT/train16.log | tail -4
done
t "gpu tests"
timeout ${TESTS_LIMIT:-300} python3 -m pytest -m gpu -q -n 4 tests/test_half_gpu.py tests/test_backward_gpu.py > $OUT/train16_gpu_tests.log 2>&1; tail -5 $OUT/train16_gpu_tests.log
t done
