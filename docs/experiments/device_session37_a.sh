# Session 37, call A: where a 16-bit training step's time goes (session 36 found the rewrite's
# steps of KernelBench 14 and 18 at M = 1024 0.5-0.7 ms where their kernels' bytes take ~0.1 ms,
# and the wgmma files' bf16 steps 0.88-1.46x eager): torch.profiler over steps of eager and the
# files in bf16 (wall, host queueing, GPU busy, kernels), then session 13's host_train.py (host
# time with the GPU idle, and cProfile) on 14.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
which nsys ncu | head -2
mkdir -p /tmp/f
for n in 14 18 51; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 --backend gemv -o /tmp/f/g${n}.py --force | tail -1; done
for n in 14 33; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 --backend wgmma -o /tmp/f/w${n}.py --force | tail -1; done
(for f in /tmp/f/*.py; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1]).build(torch.bfloat16)" $f & done; wait) > $OUT/builds.log 2>&1
grep -iE "error" $OUT/builds.log | head -5
t profiles
timeout 120 python3 docs/experiments/s37/step_kernels.py .kb/level2/14_*.py bf16 /tmp/f/w14.py /tmp/f/g14.py > $OUT/kernels_14.log 2>&1; grep -E "^==|Error" $OUT/kernels_14.log
timeout 90 python3 docs/experiments/s37/step_kernels.py .kb/level2/18_*.py bf16 /tmp/f/g18.py > $OUT/kernels_18.log 2>&1; grep -E "^==|Error" $OUT/kernels_18.log
timeout 90 python3 docs/experiments/s37/step_kernels.py .kb/level2/51_*.py bf16 /tmp/f/g51.py > $OUT/kernels_51.log 2>&1; grep -E "^==|Error" $OUT/kernels_51.log
timeout 90 python3 docs/experiments/s37/step_kernels.py .kb/level2/33_*.py bf16 /tmp/f/w33.py > $OUT/kernels_33.log 2>&1; grep -E "^==|Error" $OUT/kernels_33.log
t host
timeout 120 python3 docs/experiments/s13/host_train.py .kb/level2/14_*.py --dtype bf16 /tmp/f/w14.py /tmp/f/g14.py > $OUT/host_14.log 2>&1; grep -E "host .* GPU|Error" $OUT/host_14.log
t done
cd $OUT && tar cf /tmp/a.tar * && rm -f * && mv /tmp/a.tar $OUT/a.tar
