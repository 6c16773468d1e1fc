# Session 41, call D: where the bf16 steps still above eager's go after the C++ node (call B's
# table: 99 1.14x, 66 1.31x, 84 1.11x, 45 1.08x): s37/step_kernels.py per file (the GPU's busy
# time against the host's time to queue a step, the kernels by GPU time, the ops by host time).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
for n in 99 66 84 45; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/g/k${n}_bf16.py --force | tail -1 | cut -c1-120; done
build_files /tmp/g builds.log
python3 -c "from kgen.check.loading import EmittedFile; EmittedFile('/tmp/g/k99_bf16.py').module._kgen_native_module()"
t "profiles"
for n in 99 66 84 45; do
  timeout 90 python3 docs/experiments/s37/step_kernels.py .kb/level2/${n}_*.py bf16 /tmp/g/k${n}_bf16.py > $OUT/kernels_${n}_bf16.log 2>&1
  echo "$n exit $?"; grep -E "^==" $OUT/kernels_${n}_bf16.log; done
t done
