# Session 39, call B: a 16-bit training step's host time by Python function (cProfile;
# docs/experiments/s39/step_host.py): KernelBench 98 (old, committed, the means through an
# autograd.Function) and 12 in bf16, beside eager's.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/b
python3 -m kgen.cli generate .kb/level2/98_*.py --dtype bf16 -o /tmp/b/k98_bf16_new.py --force | tail -1
python3 docs/experiments/s39/means_variants.py /tmp/b/k98_bf16_new.py /tmp/b; rm /tmp/b/k98_bf16_fnsum.py
python3 -m kgen.cli generate .kb/level2/12_*.py --dtype bf16 -o /tmp/b/k12_bf16_new.py --force | tail -1
cp .kb/s38_old/k98_bf16_old.py /tmp/b/
build_files /tmp/b builds.log
t "host time"
timeout 200 python3 docs/experiments/s39/step_host.py .kb/level2/98_*.py bf16 /tmp/b/k98_bf16_{old,new,fn}.py > $OUT/host_98_bf16.log 2>&1; echo "98 exit $?"; grep "^==" $OUT/host_98_bf16.log
timeout 100 python3 docs/experiments/s39/step_host.py .kb/level2/12_*.py bf16 /tmp/b/k12_bf16_new.py > $OUT/host_12_bf16.log 2>&1; echo "12 exit $?"; grep "^==" $OUT/host_12_bf16.log
t done
