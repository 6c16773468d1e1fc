# Session 47, call A: what session 46 left un-run on the GPU (the 17-row lower limit of the fp32
# weight under autocast, the whole tests/test_half_gpu.py, KernelBench's 36 files under autocast),
# and where an inference forward's host time goes (s47/forward_host.py) for four of KernelBench's
# files: 12 (a GEMM and a point-wise chain), 33 (BatchNorm), 51 (the matrix-vector rewrite) in
# bf16, and 12's fp32 file in fp32 and inside bf16 autocast.
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/a
for n in 12 33 51; do kgen generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/a/kb${n}_bf16.py > /dev/null; done
kgen generate .kb/level2/12_*.py -o /tmp/a/kb12_fp32.py > /dev/null
t "build (background)"
python3 - > $OUT/a_builds.log 2>&1 <<'PY' &
import torch
from kgen.check.loading import EmittedFile
for n in (12, 33, 51):
    EmittedFile(f"/tmp/a/kb{n}_bf16.py").build(torch.bfloat16)
f = EmittedFile("/tmp/a/kb12_fp32.py")
f.build(torch.float32)
f.build(torch.bfloat16, autocast=True, fp32_weight=True)
print("built")
PY
builds=$!
t "tests"
gpu_tests a_gpu_half.log 400 tests/test_half_gpu.py
left=$(( 480 - ($(date +%s) - start) ))
gpu_tests a_gpu_kb_autocast.log $left tests/test_kernelbench_autocast_gpu.py
wait $builds; tail -1 $OUT/a_builds.log
t "host profiles"
for n in 12 33 51; do
  timeout 40 python3 docs/experiments/s47/forward_host.py $(ls .kb/level2/${n}_*.py) bf16 /tmp/a/kb${n}_bf16.py > $OUT/a_host_kb${n}_bf16.log 2>&1
done
timeout 40 python3 docs/experiments/s47/forward_host.py $(ls .kb/level2/12_*.py) fp32 /tmp/a/kb12_fp32.py > $OUT/a_host_kb12_fp32.log 2>&1
timeout 40 python3 docs/experiments/s47/forward_host.py $(ls .kb/level2/12_*.py) autocast /tmp/a/kb12_fp32.py > $OUT/a_host_kb12_autocast.log 2>&1
grep -h "^==\|^NVIDIA" $OUT/a_host_*.log
t "end"
