# Session 36, call C (0d34746: the rewrite's backward reads x, w and writes dx, dW in the module's
# dtype; its outer products a row at a time): the rewrite's GPU tests again, the refs' rewrite,
# the custom-op tests, then one training step of KernelBench 14, 18, 51 in fp32, bf16 and fp16
# (eager, the wgmma GEMM's file, the rewrite's file) with the gradients' errors against fp64.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
for n in 14 18 51; do for b in gemv wgmma; do
  python3 -m kgen.cli generate .kb/level2/${n}_*.py --backend $b -o /tmp/f/${n}_$b.py --force | tail -1
done; done
(for f in /tmp/f/*.py; do for d in float32 bfloat16 float16; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1]).build(getattr(torch, sys.argv[2]))" $f $d & done; done; wait) > $OUT/builds.log 2>&1 &
builds=$!
t gemv backward GPU tests
gpu_tests gemv_backward.log 240 tests/test_gemv_backward.py tests/test_gemv_half.py
gpu_tests refs_gemv.log 120 tests/test_refs_gpu.py -k matrix_vector
gpu_tests custom_ops.log 100 tests/test_custom_ops.py
wait $builds; grep -iE "error" $OUT/builds.log | head -5
t "training steps"
for n in 14 18 51; do for d in fp32 bf16 fp16; do
  timeout 100 python3 docs/experiments/s36/gemv_training.py .kb/level2/${n}_*.py /tmp/f/${n}_wgmma.py /tmp/f/${n}_gemv.py $d 2>&1 | tee $OUT/train_${n}_$d.log | grep -v Warning
done; done
t done
cd $OUT && tar cf /tmp/c.tar * && rm -f * && mv /tmp/c.tar $OUT/c.tar
