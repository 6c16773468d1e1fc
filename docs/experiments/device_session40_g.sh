# Session 40, call G: a 16-bit build's row kernels read g and write dz in the module's dtype too
# (a row kernel before BatchNorm writes an fp32 dz for the prefix), so only a broadcast tail's and
# the matrix-vector rewrite's backward still convert g. The 16-bit gradient and gate tests and the
# fp32 row modules' backward; 37 and 66 in bf16 against d933b0c's files (s40/vjp_host.py: the step,
# the vjp's device-thread time, a step's peak memory) and 37's gradients against fp64.
# Run as: timeout 400 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
cp .kb/s40_old/k37_bf16_old.py .kb/s40_old/k66_bf16_old.py /tmp/g/
for n in 37 66; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/g/k${n}_bf16_new.py --force | tail -1; done
build_files /tmp/g builds.log
t "vjp host and memory"
for n in 37 66; do
  timeout 60 python3 docs/experiments/s40/vjp_host.py .kb/level2/${n}_*.py bf16 /tmp/g/k${n}_bf16_old.py /tmp/g/k${n}_bf16_new.py > $OUT/vjp_${n}_bf16.log 2>&1
  echo "$n exit $?"; grep -E "wall|peak memory" $OUT/vjp_${n}_bf16.log | grep -v identity | cut -c1-250; done
timeout 50 python3 -m kgen.cli bench /tmp/g/k37_bf16_new.py --training --dtype bf16 > $OUT/train_k37_bf16_new.log 2>&1
echo "37: exit $? $(grep -E '^ModelNew|^eager|^  ' $OUT/train_k37_bf16_new.log | tr -s ' ' | cut -c1-64 | tr '\n' ' ')"
t "gpu tests"
gpu_tests t_half.log 140 tests/test_half_gpu.py -k "gradients or full_gate"
gpu_tests t_backward.log 60 tests/test_backward_gpu.py -k "groupnorm or softmax or row or pool"
t done
