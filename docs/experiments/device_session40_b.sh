# Session 40, call B: a 16-bit build's backward entry takes g and gives the column sums and dz in
# the module's dtype (its fp32 copies converted in the C entry: no tensor op of host time for each
# in the Python). s40/vjp_host.py: the step, forward, backward() and the device thread's time in
# the vjp, d933b0c's files (.kb/s40_old/) against this tree's, interleaved with eager; and each
# gradient's error against fp64 beside eager's (`kgen bench --training`).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
cp .kb/s40_old/*.py /tmp/g/
for f in 12:bf16 33:bf16 66:bf16 33:fp16 12:fp32; do n=${f%:*}; d=${f#*:}
  python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype $d -o /tmp/g/k${n}_${d}_new.py --force | tail -1; done
python3 -m kgen.cli generate .kb/level2/18_*.py --dtype bf16 --backend gemv -o /tmp/g/k18gemv_bf16_new.py --force | tail -1
build_files /tmp/g builds.log
t "vjp host, old against new"
for f in 12:bf16 33:bf16 66:bf16 33:fp16; do n=${f%:*}; d=${f#*:}
  timeout 70 python3 docs/experiments/s40/vjp_host.py .kb/level2/${n}_*.py $d /tmp/g/k${n}_${d}_old.py /tmp/g/k${n}_${d}_new.py > $OUT/vjp_${n}_$d.log 2>&1
  echo "$n $d exit $?"; sed -n 2,5p $OUT/vjp_${n}_$d.log | cut -c1-330; done
t "gradients"
for f in k12_bf16_new:bf16 k33_bf16_new:bf16 k33_fp16_new:fp16 k66_bf16_new:bf16 k18gemv_bf16_new:bf16 k18gemv_bf16_old:bf16 k12_fp32_new:fp32; do n=${f%:*}; d=${f#*:}
  timeout 50 python3 -m kgen.cli bench /tmp/g/$n.py --training --dtype $d > $OUT/train_$n.log 2>&1
  echo "$n: exit $? $(grep -E '^ModelNew|^eager|^  ' $OUT/train_$n.log | tr -s ' ' | cut -c1-64 | tr '\n' ' ')"; done
t done
