# Session 54, call F, at the merged tree: the gate on 2048 x 1024 -> 32 (the kink probe's second
# direction) and on Linear -> F.normalize with zero rows in its input (norm_sqrt); a training
# step's gradients of the latter finite and torch's; the fp32-exact gradient tests on the refs
# with a division, a norm or a softmax; KernelBench's eval at fp32 on 12, 23, 33.
source scripts/device_setup.sh
mkdir -p $OUT
t build
build_files ab/f6 builds.log
for r in 2048_1024_32 normalize_pad; do
  timeout 120 python3 -m kgen validate ab/f6/${r}_fp32.py > $OUT/validate_$r.log 2>&1; echo "validate $r: $?"; grep -E "FAIL|passed" $OUT/validate_$r.log | cut -c1-300
done
python3 - <<'PY' 2>&1 | tail -3
import torch
from kgen.check.loading import EmittedFile
f = EmittedFile("ab/f6/normalize_pad_fp32.py")
torch.manual_seed(0)
with torch.device("cuda"):
    ref = f.Model(*f.init_args()).double(); new = f.ModelNew(*f.init_args())
new.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
x = f.reference.get_inputs()[0].cuda() if hasattr(f, "reference") else None
x = torch.randn(512, 256, device="cuda"); x[::7] = 0
g = torch.randn(512, 128, device="cuda")
ref(x.double()).backward(g.double()); new(x).backward(g)
a, b = new.proj.weight.grad, ref.proj.weight.grad
print("dW finite:", bool(torch.isfinite(a).all()), "max |dW - dW64|:", float((a.double() - b).abs().max()), "max |dW64|:", float(b.abs().max()))
PY
gpu_tests gpu_backward.log 150 tests/test_backward_gpu.py -k "fp32_exact and (normalize or softmax or div_swish)"
NUMS="12 23 33" PRECISIONS=fp32 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | tail -6
t done
