# Session 39, call D: the pooled weight's means as one autograd.Function whose backward stacks
# g / k (graph.WINDOW_MEANS_SOURCE): KernelBench 98's training step, interleaved with eager and the
# files before (959b065: z pooled by the kernels; 9c1352c: the means by autograd's view and mean)
# in three dtypes (docs/experiments/s39/step_ab.py), each gradient's error (`kgen bench --training`),
# the GPU tests and KernelBench's eval of 98 at three precisions.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/d
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/d/k98_${d}_fn.py --force | tail -1; done
cp .kb/s39_old/k98_*_c9.py /tmp/d/; cp .kb/s38_old/k98_bf16_old.py /tmp/d/k98_bf16_959b.py; cp .kb/s38_old/k98_fp16_old.py /tmp/d/k98_fp16_959b.py
build_files /tmp/d builds.log
t "one training step, interleaved"
for d in bf16 fp16; do timeout 100 python3 docs/experiments/s39/step_ab.py .kb/level2/98_*.py $d /tmp/d/k98_${d}_{959b,c9,fn}.py > $OUT/ab_98_$d.log 2>&1; echo "$d exit $?"; tail -4 $OUT/ab_98_$d.log | cut -c1-200; done
timeout 100 python3 docs/experiments/s39/step_ab.py .kb/level2/98_*.py fp32 /tmp/d/k98_fp32_{c9,fn}.py > $OUT/ab_98_fp32.log 2>&1; echo "fp32 exit $?"; tail -3 $OUT/ab_98_fp32.log | cut -c1-200
t "gradients"
for d in fp32 bf16 fp16; do timeout 50 python3 -m kgen.cli bench /tmp/d/k98_${d}_fn.py --training --dtype $d > $OUT/train_${d}_fn.log 2>&1
  echo "$d: exit $? $(grep -E '^ModelNew|^eager|input|weight|bias' $OUT/train_${d}_fn.log | tr -s ' ' | cut -c1-70 | tr '\n' ' ')"; done
t "gpu tests"
gpu_tests t_pool_weight.log 150 tests/test_pool_weight.py
t "KernelBench's eval"
NUMS="98" PRECISIONS="fp32 bf16 fp16" EVAL_LIMIT=60 bash scripts/device_kernelbench.sh 2>&1 | grep -E '^\| 98|correct under'
t done
