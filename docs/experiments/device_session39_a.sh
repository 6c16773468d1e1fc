# Session 39, call A: KernelBench 98's 16-bit training step (1.39x eager bf16 after session 38's
# pooled weight, 1.09x before): where the step's time goes (docs/experiments/s37/step_kernels.py,
# the old file, the committed one, and the means through an autograd.Function whose backward
# writes dW in one pass: docs/experiments/s39/means_variants.py), one training step of each by
# `kgen bench --training`, and s38/means_backward.py with its 16-bit rows mended.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/a
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/a/k98_${d}_new.py --force | tail -1
  python3 docs/experiments/s39/means_variants.py /tmp/a/k98_${d}_new.py /tmp/a; done
cp .kb/s38_old/k98_bf16_old.py .kb/s38_old/k98_fp16_old.py /tmp/a/
ls /tmp/a
build_files /tmp/a builds.log
t means
timeout 120 python3 docs/experiments/s38/means_backward.py > $OUT/means_backward.log 2>&1; grep -E "^(float|bfloat|NVIDIA)" $OUT/means_backward.log | cut -c1-150
t "where a step's time goes"
for d in bf16 fp16; do timeout 100 python3 docs/experiments/s37/step_kernels.py .kb/level2/98_*.py $d /tmp/a/k98_${d}_{old,new,fn,fnsum}.py > $OUT/steps_$d.log 2>&1
  echo "$d exit $?"; grep "^==" $OUT/steps_$d.log; done
t "one training step"
for f in fp32_new fp32_fn bf16_old bf16_new bf16_fn bf16_fnsum fp16_old fp16_new fp16_fn fp16_fnsum; do d=${f%_*}
  timeout 50 python3 -m kgen.cli bench /tmp/a/k98_$f.py --training --dtype $d > $OUT/train_$f.log 2>&1
  echo "$f: exit $? $(grep -E '^ModelNew|^eager|weight' $OUT/train_$f.log | tr -s ' ' | cut -c1-70 | tr '\n' ' ')"; done
t done
