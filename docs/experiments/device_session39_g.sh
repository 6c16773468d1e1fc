# Session 39, call G: the backward's host path three tensor ops shorter (the C entry zeroes the
# column sums; no slices of them; a 16-bit module's backward kernels from its own build, reading
# its parameters in their dtype): one bf16 training step of KernelBench 12 and 33, 9c1352c's file
# against this tree's, interleaved with eager (s39/step_ab.py); each gradient's error against
# fp64 beside eager's (`kgen bench --training`: 33 in bf16 and fp16 (BatchNorm's dβ, dγ rows),
# 66 in bf16 (Dropout's mask, an operand now read in its dtype), 12 in fp32); and the GPU tests
# of the backward, bench --training, the 16-bit gradients, and custom ops under compile / graphs.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
for n in 12 33; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/g/k${n}_bf16_new.py --force | tail -1; cp .kb/s39_old/k${n}_bf16_c9.py /tmp/g/; done
python3 -m kgen.cli generate .kb/level2/66_*.py --dtype bf16 -o /tmp/g/k66_bf16_new.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/33_*.py --dtype fp16 -o /tmp/g/k33_fp16_new.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/12_*.py --dtype fp32 -o /tmp/g/k12_fp32_new.py --force | tail -1
build_files /tmp/g builds.log
t "one training step, interleaved"
for n in 12 33; do timeout 60 python3 docs/experiments/s39/step_ab.py .kb/level2/${n}_*.py bf16 /tmp/g/k${n}_bf16_{c9,new}.py > $OUT/ab_${n}_bf16.log 2>&1; echo "$n exit $?"; tail -3 $OUT/ab_${n}_bf16.log | cut -c1-200; done
t "gradients"
for f in k33_bf16_new:bf16 k33_fp16_new:fp16 k66_bf16_new:bf16 k12_fp32_new:fp32; do n=${f%:*}; d=${f#*:}
  timeout 50 python3 -m kgen.cli bench /tmp/g/$n.py --training --dtype $d > $OUT/train_$n.log 2>&1
  echo "$n: exit $? $(grep -E '^ModelNew|^eager|^  ' $OUT/train_$n.log | tr -s ' ' | cut -c1-64 | tr '\n' ' ')"; done
t "gpu tests"
gpu_tests t_backward.log 60 tests/test_backward_gpu.py -k "groupnorm or softmax or swish"
gpu_tests t_custom_ops.log 70 tests/test_custom_ops.py
gpu_tests t_half.log 80 tests/test_half_gpu.py -k "backward or gradients"
gpu_tests t_bench_training.log 70 tests/test_bench_training_gpu.py
t done
