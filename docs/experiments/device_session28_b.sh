# Session 28, call B: the module's input read per element before a row op (trace.Tracer._tile_input,
# EpilogueParams::d_input) on the GPU: its GPU tests (kgen's full gate, both GEMM backends), the
# element-operand and tail-backward GPU tests beside it (the mask's and the tail's reads, unchanged
# in intent), and a post-norm residual block at a transformer's shape against eager fp32.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/b
cat > /tmp/b/postln.py <<'PY'
import torch
import torch.nn as nn


class Model(nn.Module):
    """A post-norm residual block: LayerNorm(x + Dropout(Linear(x)))."""

    def __init__(self, d_model, p):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(p)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        return self.norm(x + self.drop(self.proj(x)))


batch_size = 4096
d_model = 4096


def get_inputs():
    return [torch.randn(batch_size, d_model)]


def get_init_inputs():
    return [d_model, 0.1]
PY
t "post-norm block: generate (the rule's choice) and build in the background"
(cd /tmp/b && kgen generate postln.py -o postln_new.py --force && python3 -m kgen.tune.worker build postln_new.py) > $OUT/b_postln_build.log 2>&1 &
t "gpu tests"
timeout 420 python3 -m pytest -m gpu -q -rfEx tests/test_input_residual.py tests/test_element_operands.py tests/test_tail_backward.py > $OUT/b_gpu_tests.log 2>&1
echo "exit $?"; tail -4 $OUT/b_gpu_tests.log | cut -c1-400
wait
t "post-norm block: kgen bench and kgen validate"
(cd /tmp/b && timeout 60 kgen bench postln_new.py && timeout 90 kgen validate postln_new.py) > $OUT/b_postln_bench.log 2>&1
grep -E "ModelNew|eager|error|passed|FAIL|checks" $OUT/b_postln_bench.log | cut -c1-200
t done
