# Session 40, call E: the 16-bit backward with typed g and dz (this tree) against d933b0c's files
# (.kb/s40_old/): s40/vjp_host.py (step, forward, backward(), the vjp's device-thread time, a
# step's peak memory), interleaved with eager; the gradients of the big staged files against fp64
# beside eager's (`kgen bench --training`); the rest of call D's cut groups (the rewrite's 16-bit
# file under the full gate and compile, the output-written tests).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
cp .kb/s40_old/*.py /tmp/g/
for f in 12:bf16 66:bf16 39:bf16 37:bf16 33:fp16; do n=${f%:*}; d=${f#*:}
  python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype $d -o /tmp/g/k${n}_${d}_new.py --force | tail -1; done
rm -f /tmp/g/k18gemv_bf16_old.py /tmp/g/k33_bf16_old.py
build_files /tmp/g builds.log
t "vjp host and memory, old against new"
for f in 12:bf16 66:bf16 39:bf16 37:bf16; do n=${f%:*}; d=${f#*:}
  timeout 80 python3 docs/experiments/s40/vjp_host.py .kb/level2/${n}_*.py $d /tmp/g/k${n}_${d}_old.py /tmp/g/k${n}_${d}_new.py > $OUT/vjp_${n}_$d.log 2>&1
  echo "$n $d exit $?"; grep -E "wall|peak memory" $OUT/vjp_${n}_$d.log | grep -v identity | cut -c1-250; done
t "gradients"
for f in k39_bf16_new:bf16 k37_bf16_new:bf16 k33_fp16_new:fp16; do n=${f%:*}; d=${f#*:}
  timeout 60 python3 -m kgen.cli bench /tmp/g/$n.py --training --dtype $d > $OUT/train_$n.log 2>&1
  echo "$n: exit $? $(grep -E '^ModelNew|^eager|^  ' $OUT/train_$n.log | tr -s ' ' | cut -c1-64 | tr '\n' ' ')"; done
t "gpu tests"
gpu_tests t_gemv_half.log 100 tests/test_gemv_half.py -k "full_gate or compile or graph"
t done
