# Session 39, call C: the pooled weight's means as one autograd.Function (graph.WINDOW_MEANS_SOURCE):
# KernelBench 98's training step against the committed file's (9c1352c) in three dtypes (host time by
# docs/experiments/s39/step_host.py, and `kgen bench --training`), ways to write the means'
# gradient (s39/expand_ways.py), and the pooled weight's GPU tests.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/c
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/c/k98_${d}_fn.py --force | tail -1; done
cp .kb/s39_old/k98_*_c9.py /tmp/c/
build_files /tmp/c builds.log
t expand
timeout 60 python3 docs/experiments/s39/expand_ways.py > $OUT/expand_ways.log 2>&1; cat $OUT/expand_ways.log
t "host time"
for d in bf16 fp16; do timeout 100 python3 docs/experiments/s39/step_host.py .kb/level2/98_*.py $d /tmp/c/k98_${d}_{c9,fn}.py > $OUT/host_98_$d.log 2>&1; echo "$d exit $?"; grep "^==" $OUT/host_98_$d.log; done
t "one training step"
for f in fp32_c9 fp32_fn bf16_c9 bf16_fn fp16_c9 fp16_fn; do d=${f%_*}
  timeout 50 python3 -m kgen.cli bench /tmp/c/k98_$f.py --training --dtype $d > $OUT/train_$f.log 2>&1
  echo "$f: exit $? $(grep -E '^ModelNew|^eager|weight|bias' $OUT/train_$f.log | tr -s ' ' | cut -c1-70 | tr '\n' ' ')"; done
t "gpu tests"
gpu_tests t_pool_weight.log 200 tests/test_pool_weight.py
t done
