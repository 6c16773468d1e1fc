# Session 38, call F: the pooled weight's last form (no slice where the windows cover W) on the
# GPU: its GPU tests, KernelBench 98 before (959b065's files) / after / eager interleaved, one
# training step, KernelBench's eval at three precisions.
# Run as: timeout 400 bash THIS; cd $OUT && tar cf /tmp/f.tar * && find . -mindepth 1 -delete && mv /tmp/f.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/f/k98_${d}_new.py --force | tail -1; done
cp .kb/s38_old/k98_*.py /tmp/f/
build_files /tmp/f builds.log
t tests
gpu_tests t_pool_weight.log 150 -rs tests/test_pool_weight.py
t "98: before / after / eager, interleaved"
for d in fp32 bf16 fp16; do timeout 50 python3 scripts/compare_forward.py .kb/level2/98_*.py /tmp/f/k98_${d}_old.py /tmp/f/k98_${d}_new.py --dtype $d > $OUT/cmp_98_$d.log 2>&1; echo "== $d (exit $?)"; tail -3 $OUT/cmp_98_$d.log | head -2 | cut -c1-110; done
t "one training step"
for d in fp32 bf16 fp16; do for v in old new; do timeout 40 python3 -m kgen.cli bench /tmp/f/k98_${d}_$v.py --training --dtype $d > $OUT/train_${d}_$v.log 2>&1
  echo "$d $v: exit $? $(grep -E '^ModelNew|^eager' $OUT/train_${d}_$v.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"; done; done
t "KernelBench's eval"
NUMS="98" PRECISIONS="fp32 bf16 fp16" EVAL_LIMIT=60 bash scripts/device_kernelbench.sh 2>&1 | grep -E '^\| 98|correct under'
t done
