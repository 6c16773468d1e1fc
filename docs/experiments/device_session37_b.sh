# Session 37, call B: one bf16 training step of every KernelBench level-2 GEMM file (its
# `kgen generate --dtype bf16` file: the bf16 search's winner) against eager bf16, with
# `kgen bench --training` (new this session), and that command's GPU tests. (As it ran in call B,
# bench had no --dtype: it took the reference's, fp32, so call B's table is the fp32 files' steps.)
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
D=${DTYPE:-bf16}
mkdir -p /tmp/f $OUT/logs
ls .kb/level2/*.py | xargs -P 16 -I{} sh -c 'n=$(basename {} | cut -d_ -f1); python3 -m kgen.cli generate {} --dtype '$D' -o /tmp/f/k$n.py --force > /tmp/f/gen_$n.log 2>&1 || echo "generate $n failed"'
t generated $(ls /tmp/f/*.py | wc -l)
(for f in /tmp/f/*.py; do python3 -c "
import sys, torch; from kgen.check.loading import EmittedFile
EmittedFile(sys.argv[1], with_reference=False).build(getattr(torch, sys.argv[2]))" $f $([ $D = fp16 ] && echo float16 || echo bfloat16) & done; wait) > $OUT/builds.log 2>&1
grep -iE "error" $OUT/builds.log | head -5
t built
for f in $(ls /tmp/f/k*.py | sort -V); do n=$(basename $f .py | tr -d k)
  timeout 90 python3 -m kgen.cli bench $f --training --iters 100 --dtype $D > $OUT/logs/train_$n.log 2>&1
  echo "$n: $(grep -E '^ModelNew|^eager' $OUT/logs/train_$n.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"
done
t table
python3 docs/experiments/s37/training_table.py $OUT/logs | tee $OUT/table.md | tail -3
[ -n "$GPU_TESTS" ] && gpu_tests bench_training_gpu.log 200 $GPU_TESTS
t done
cd $OUT && tar cf /tmp/b.tar * && rm -rf logs *.log *.md && mv /tmp/b.tar $OUT/b.tar
