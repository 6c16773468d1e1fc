# Session 37, call D: (1) the host-path change (62e5e6d: the raw stream, the backward's workspace
# size asked once; the rewrite's empty d_input) as an A/B in one process: eager, the file of
# 3d4eb4b (generated here into .kb/s37_old/, carried) and of this tree, KernelBench 14 (the
# rewrite) and 33 (the wgmma GEMM) in bf16; (2) `kgen bench --training`'s GPU tests after the
# review's mends; (3) the bf16 training steps of 98 and 99 (call C's table stopped at 98);
# (4) KernelBench's eval of 12 and 51 in bf16 at this code.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f $OUT/logs
python3 -m kgen.cli generate .kb/level2/14_*.py --dtype bf16 --backend gemv -o /tmp/f/g14_new.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/33_*.py --dtype bf16 --backend wgmma -o /tmp/f/w33_new.py --force | tail -1
for n in 98 99; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/f/k$n.py --force | tail -1; done
cp .kb/s37_old/*.py /tmp/f/
(for f in /tmp/f/*.py; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1], with_reference=False).build(torch.bfloat16)" $f & done; wait) > $OUT/builds.log 2>&1
grep -iE "error" $OUT/builds.log | head -5
t "A/B of the host path"
timeout 60 python3 docs/experiments/s37/step_kernels.py .kb/level2/14_*.py bf16 /tmp/f/g14_old.py /tmp/f/g14_new.py > $OUT/ab_14.log 2>&1; grep -E "^==|Error" $OUT/ab_14.log
timeout 60 python3 docs/experiments/s37/step_kernels.py .kb/level2/33_*.py bf16 /tmp/f/w33_old.py /tmp/f/w33_new.py > $OUT/ab_33.log 2>&1; grep -E "^==|Error" $OUT/ab_33.log
t tests
gpu_tests tests.log 120 tests/test_bench_training_gpu.py
t "98, 99"
for n in 98 99; do timeout 60 python3 -m kgen.cli bench /tmp/f/k$n.py --training --iters 100 --dtype bf16 > $OUT/logs/train_$n.log 2>&1
  echo "$n: $(grep -E '^ModelNew|^eager' $OUT/logs/train_$n.log | tr -s ' ' | cut -c1-44 | tr '\n' ' ')"; done
t "KernelBench eval"
if [ $(( $(date +%s) - start )) -lt 200 ]; then
  NUMS="12 51" PRECISIONS="bf16" EVAL_LIMIT=100 timeout 120 bash scripts/device_kernelbench.sh 2>&1 | tail -8
else echo "skipped: time"; fi
t done
cd $OUT && tar cf /tmp/d.tar * && find . -mindepth 1 -delete && mv /tmp/d.tar $OUT/d.tar && ls $OUT
