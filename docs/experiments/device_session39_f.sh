# Session 39, call F: the host's share of a 16-bit training step beyond 98: KernelBench 12, 33, 66
# (1.56x, 1.59x, 1.82x eager fp16 in call E's table) in bf16, interleaved with eager
# (docs/experiments/s39/step_ab.py: wall, host queue time and the main thread's CPU time a step).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
for n in 12 33 66; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/f/k${n}_bf16.py --force | tail -1; done
build_files /tmp/f builds.log
for n in 12 33 66; do timeout 100 python3 docs/experiments/s39/step_ab.py .kb/level2/${n}_*.py bf16 /tmp/f/k${n}_bf16.py > $OUT/ab_${n}_bf16.log 2>&1; echo "$n exit $?"; tail -2 $OUT/ab_${n}_bf16.log | cut -c1-220; done
t done
