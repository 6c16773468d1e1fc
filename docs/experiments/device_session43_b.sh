# Session 43, call B: the build for torch.autocast reads parameters and buffers in fp32
# (kernels/common.cuh, Param), so a training BatchNorm of an fp32 module computes in autocast's
# dtype (before: the fp32 kernels), and the ops take the autocast decision as an argument (call A:
# a compiled graph runs the op's body with autocast off, and got the other build). Tests, then
# KernelBench's BatchNorm files (33, 97) and 76 (a bias added in fp32) inside bf16 autocast in
# training mode: kgen / eager autocast, and kgen's fp32 kernels (what a training BatchNorm ran).
source scripts/device_setup.sh
t "half autocast"
gpu_tests b_half_autocast.log 200 tests/test_half_gpu.py -k "autocast"
t "custom ops, native node, dtype rule"
gpu_tests b_custom_ops.log 120 tests/test_custom_ops.py tests/test_native_backward.py tests/test_autocast_dtype_gpu.py
t "generate"
mkdir -p /tmp/ab
NUMS="33 97 76"
for n in $NUMS; do f=$(ls .kb/level2/${n}_*.py); kgen generate $f -o /tmp/ab/$n.py > /dev/null 2>&1 || echo "generate $n failed"; done
t "build"
(for n in $NUMS; do for a in "torch.float32, False" "torch.bfloat16, True"; do python3 -c "
from kgen.check.loading import EmittedFile; import torch
EmittedFile('/tmp/ab/$n.py').build($a)" & done; done; wait) > $OUT/b_builds.log 2>&1
grep -iE "error" $OUT/b_builds.log | head -5
t "A/B"
for n in $NUMS; do timeout 45 python3 docs/experiments/s42/autocast_ab.py $(ls .kb/level2/${n}_*.py) /tmp/ab/$n.py bf16 train > $OUT/b_ab_${n}_bf16_train.log 2>&1; tail -10 $OUT/b_ab_${n}_bf16_train.log | grep -E "x eager|error"; done
t "end"
