# Session 37, call C: (1) call A's profile again at this code (the raw stream, the backward's
# workspace size asked once: host time of the rewrite's and the wgmma file's bf16 steps);
# (2) GPU tests of those changes and of `kgen bench --training`; (3) the family's bf16 training
# steps (call B's loop with --dtype bf16: every file's `kgen generate --dtype bf16` file).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f $OUT/logs
ls .kb/level2/*.py | xargs -P 16 -I{} sh -c 'n=$(basename {} | cut -d_ -f1); python3 -m kgen.cli generate {} --dtype bf16 -o /tmp/f/k$n.py --force > /tmp/f/gen_$n.log 2>&1 || echo "generate $n failed"'
python3 -m kgen.cli generate .kb/level2/14_*.py --dtype bf16 --backend gemv -o /tmp/f/g14.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/33_*.py --dtype bf16 --backend wgmma -o /tmp/f/w33.py --force | tail -1
(for f in /tmp/f/*.py; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1], with_reference=False).build(torch.bfloat16)" $f & done; wait) > $OUT/builds.log 2>&1
grep -iE "error" $OUT/builds.log | head -5
t profiles
timeout 60 python3 docs/experiments/s37/step_kernels.py .kb/level2/14_*.py bf16 /tmp/f/g14.py > $OUT/kernels_14.log 2>&1; grep -E "^==|Error" $OUT/kernels_14.log
timeout 60 python3 docs/experiments/s37/step_kernels.py .kb/level2/33_*.py bf16 /tmp/f/w33.py > $OUT/kernels_33.log 2>&1; grep -E "^==|Error" $OUT/kernels_33.log
t tests
gpu_tests tests.log 150 tests/test_bench_training_gpu.py tests/test_custom_ops.py tests/test_gemv_backward.py -k "bench or compile or wrong or bf16"
t table
for f in $(ls /tmp/f/k*.py | sort -V); do n=$(basename $f .py | tr -d k)
  [ $(( $(date +%s) - start )) -gt 545 ] && { echo "stopped at $n: time"; break; }
  timeout 40 python3 -m kgen.cli bench $f --training --iters 100 --dtype bf16 > $OUT/logs/train_$n.log 2>&1
  echo "$n: $(grep -E '^ModelNew|^eager' $OUT/logs/train_$n.log | tr -s ' ' | cut -c1-44 | tr '\n' ' ')"
done
python3 docs/experiments/s37/training_table.py $OUT/logs > $OUT/table.md; tail -1 $OUT/table.md
t done
cd $OUT && tar cf /tmp/c.tar * && rm -rf logs *.log *.md && mv /tmp/c.tar $OUT/c.tar
