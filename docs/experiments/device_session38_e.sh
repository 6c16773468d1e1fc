# Session 38, call E: the pooled weight's backward (docs/experiments/s38/means_backward.py), and
# KernelBench 98's training step with the means written without the slice (the committed file's
# text edited in place: experiment only), in three dtypes.
# Run as: timeout 500 bash THIS; cd $OUT && tar cf /tmp/e.tar * && find . -mindepth 1 -delete && mv /tmp/e.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
t means
timeout 150 python3 docs/experiments/s38/means_backward.py > $OUT/means_backward.log 2>&1; grep -E "^(float|bfloat|NVIDIA)" $OUT/means_backward.log | cut -c1-150
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/f/k98_${d}_new.py --force | tail -1
  sed -E 's/([A-Za-z_.]+)\[:[A-Za-z_.]+\.shape\[0\] \/\/ 16 \* 16\]\.unflatten/\1.unflatten/g' /tmp/f/k98_${d}_new.py > /tmp/f/k98_${d}_noslice.py
  grep -c '\.unflatten(0, (-1, 16)).mean(1)' /tmp/f/k98_${d}_noslice.py; grep -c 'shape\[0\] // 16' /tmp/f/k98_${d}_noslice.py; done
build_files /tmp/f builds.log
t "one training step"
for d in fp32 bf16 fp16; do for v in new noslice; do timeout 50 python3 -m kgen.cli bench /tmp/f/k98_${d}_$v.py --training --dtype $d > $OUT/train_${d}_$v.log 2>&1
  echo "$d $v: exit $? $(grep -E '^ModelNew|^eager' $OUT/train_${d}_$v.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"; done; done
t done
