# Session 42, call E: (1) the 16-bit GPU tier at this session's last template (every module's
# forward, buffers, gradients, C++ node, full gate, odd K, autocast) and torch.compile / CUDA
# graphs / training (test_custom_ops); (2) the scalar bias's gradient in the configurations call
# D's test failed in (an fp32 module in eval mode, a bf16 module training), eager and kgen.
source scripts/device_setup.sh
t "bias diagnostic"
python3 -c "
from kgen.tune.spec import Spec, Tile; from kgen.codegen import generator
s = Spec.of('tests/refs/gemm_bn_bias_div_swish.py', 257, 296, 528, math='tf32x3', backend='wgmma', fusion=2,
            tile=Tile(128, 128, 32, 16, 128, stages=4))
generator.write(s, '/tmp/bias.py')"
for a in "fp32 eval" "bf16 train"; do timeout 100 python3 docs/experiments/s42/bias_grad.py /tmp/bias.py $a >> $OUT/e_bias.log 2>&1; done; grep -v "^ " $OUT/e_bias.log | tail -14
t "half"
gpu_tests e_half.log 300 tests/test_half_gpu.py -k "not output_written"
t "custom ops"
gpu_tests e_custom_ops.log 110 tests/test_custom_ops.py
t "end"
