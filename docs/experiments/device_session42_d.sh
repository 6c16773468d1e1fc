# Session 42, call D: the build for autocast writes the module's output in fp32 where eager's is
# fp32 (call C: 76's and 37's outputs, rounded to bf16 first, were 2.8-3.5x eager autocast's error
# from fp64); the C++ node converts an fp32 output's gradient. (1) test_half_gpu -k "autocast or
# cpp_node"; (2) the scalar bias's gradient (s42/bias_grad.py, its input fixed); (3) A/B again on
# 76, 37 and 12.
source scripts/device_setup.sh
t "half autocast + cpp node"
gpu_tests d_half_autocast.log 330 tests/test_half_gpu.py -k "autocast or cpp_node"
t "bias diagnostic"
python3 -c "
from kgen.tune.spec import Spec, Tile; from kgen.codegen import generator
s = Spec.of('tests/refs/gemm_bn_bias_div_swish.py', 257, 296, 528, math='tf32x3', backend='wgmma', fusion=2,
            tile=Tile(128, 128, 32, 16, 128, stages=4))
generator.write(s, '/tmp/bias.py')"
timeout 120 python3 docs/experiments/s42/bias_grad.py /tmp/bias.py > $OUT/d_bias.log 2>&1; tail -6 $OUT/d_bias.log
t "A/B"
mkdir -p /tmp/ab
NUMS="76 37 12"
for n in $NUMS; do f=$(ls .kb/level2/${n}_*.py); kgen generate $f -o /tmp/ab/$n.py > /dev/null 2>&1 || echo "generate $n failed"; done
(for n in $NUMS; do for a in "torch.float32, False" "torch.bfloat16, True"; do python3 -c "
from kgen.check.loading import EmittedFile; import torch
EmittedFile('/tmp/ab/$n.py').build($a)" & done; done; wait) > $OUT/d_builds.log 2>&1
grep -iE "error" $OUT/d_builds.log | head -5
for n in $NUMS; do timeout 45 python3 docs/experiments/s42/autocast_ab.py $(ls .kb/level2/${n}_*.py) /tmp/ab/$n.py bf16 > $OUT/d_ab_${n}_bf16.log 2>&1; tail -10 $OUT/d_ab_${n}_bf16.log | grep -E "x eager|error"; done
t "end"
