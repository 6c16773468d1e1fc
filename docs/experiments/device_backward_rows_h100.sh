# The row kernel of the staged backward taking several rows per CTA (kernels/backward.cuh,
# kBackwardRowCtas), on one GPU (logs under $OUT): the backward GPU tests, then GroupNorm ->
# Hardtanh at 16384 x 4096 -> 4096 before and after (BEFORE, AFTER: emitted files): one
# training step's peak GPU memory, and bench_training.py (time against eager, gradient errors).
. scripts/device_setup.sh
REF=tests/refs/gemm_groupnorm_hardtanh.py
for f in $BEFORE $AFTER; do (timeout 150 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done
t "backward tests"
timeout 240 python3 -m pytest -m gpu -q -rA tests/test_backward_gpu.py > $OUT/gpu_backward.log 2>&1
tail -1 $OUT/gpu_backward.log; grep -E "^(FAILED|ERROR)|^E " $OUT/gpu_backward.log | head -12
grep -A1 "several_rows" $OUT/gpu_backward.log | grep -E "kgen" | head -4
wait
for f in $BEFORE $AFTER; do
  t "peak memory $f"
  timeout 120 python3 - $REF $f <<'PY' 2>&1 | tee -a $OUT/memory.log
import sys, torch
from kgen.check.loading import EmittedFile
f = EmittedFile(sys.argv[2])
torch.manual_seed(0)
m = f.ModelNew(*f.init_args()).cuda()
x = torch.rand(f.spec.batch, f.spec.in_features, device="cuda", requires_grad=True)
g = torch.randn(f.spec.batch, f.spec.out_features, device="cuda")
m(x).backward(g); torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
m(x).backward(g); torch.cuda.synchronize()
print(f"{sys.argv[2]}: one training step's peak {(torch.cuda.max_memory_allocated() - base) / 2**20:.0f} MiB above the {base / 2**20:.0f} MiB held")
PY
  t "training $f"
  timeout 150 python3 scripts/bench_training.py $REF $f 2>&1 | tee $OUT/training_$(basename $f .py).log | tail -8
done
t done
