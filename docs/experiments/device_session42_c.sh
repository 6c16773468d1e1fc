# Session 42, call C: (1) the dtype reading's tests after the sizes / views fix; (2) where the
# scalar bias's gradient error comes from (s42/bias_grad.py); (3) KernelBench files inside
# torch.autocast, eager against the emitted file (s42/autocast_ab.py), inference and a training
# step, bf16 (and fp16 for two).
source scripts/device_setup.sh
t "dtype rule"
gpu_tests c_autocast_dtype.log 120 tests/test_autocast_dtype_gpu.py
t "bias diagnostic"
python3 -c "
from kgen.tune.spec import Spec, Tile; from kgen.codegen import generator
s = Spec.of('tests/refs/gemm_bn_bias_div_swish.py', 257, 296, 528, math='tf32x3', backend='wgmma', fusion=2,
            tile=Tile(128, 128, 32, 16, 128, stages=4))
generator.write(s, '/tmp/bias.py')"
timeout 150 python3 docs/experiments/s42/bias_grad.py /tmp/bias.py > $OUT/c_bias.log 2>&1; tail -7 $OUT/c_bias.log
t "generate"
mkdir -p /tmp/ab
NUMS="12 76 99 37 30 98"
for n in $NUMS; do f=$(ls .kb/level2/${n}_*.py); kgen generate $f -o /tmp/ab/$n.py > /dev/null 2>&1 || echo "generate $n failed"; done
t "build"
(for n in $NUMS; do for a in "torch.float32, False" "torch.bfloat16, True"; do python3 -c "
from kgen.check.loading import EmittedFile; import torch
EmittedFile('/tmp/ab/$n.py').build($a)" & done; done; for n in 12; do python3 -c "
from kgen.check.loading import EmittedFile; import torch
EmittedFile('/tmp/ab/$n.py').build(torch.float16, True)" & done; wait) > $OUT/c_builds.log 2>&1
grep -iE "error" $OUT/c_builds.log | head -5
t "A/B"
for n in $NUMS; do timeout 45 python3 docs/experiments/s42/autocast_ab.py $(ls .kb/level2/${n}_*.py) /tmp/ab/$n.py bf16 > $OUT/c_ab_${n}_bf16.log 2>&1; tail -10 $OUT/c_ab_${n}_bf16.log | grep -E "x eager|error"; done
for n in 12; do timeout 45 python3 docs/experiments/s42/autocast_ab.py $(ls .kb/level2/${n}_*.py) /tmp/ab/$n.py fp16 > $OUT/c_ab_${n}_fp16.log 2>&1; tail -10 $OUT/c_ab_${n}_fp16.log | grep -E "x eager"; done
t "end"
