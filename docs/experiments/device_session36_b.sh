# Session 36, call B (after c01582f's kept column sums moved to a 16-byte boundary: call A's
# misaligned float4 read at M = 257, and its test fixture's dtype names): the rewrite's backward
# GPU tests, the refs' rewrite at odd shapes (full gate, gradients), the custom-op tests (torch.compile,
# CUDA graphs), and KernelBench 51's training step in fp16.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t gemv backward GPU tests
gpu_tests gemv_backward.log 300 tests/test_gemv_backward.py tests/test_gemv_half.py
gpu_tests refs_gemv.log 150 tests/test_refs_gpu.py -k matrix_vector
gpu_tests custom_ops.log 120 tests/test_custom_ops.py
mkdir -p /tmp/f
for b in gemv wgmma; do python3 -m kgen.cli generate .kb/level2/51_*.py --backend $b -o /tmp/f/51_$b.py --force | tail -1; done
timeout 150 python3 docs/experiments/s36/gemv_training.py .kb/level2/51_*.py /tmp/f/51_wgmma.py /tmp/f/51_gemv.py fp16 2>&1 | tee $OUT/train_51_fp16.log | grep -v Warning
t done
cd $OUT && tar cf /tmp/b.tar * && rm -f * && mv /tmp/b.tar $OUT/b.tar
