# Session 40, call A: where a 16-bit step's backward spends the host's time (the plan's item 0):
# s40/vjp_host.py on KernelBench 12, 33, 66 in bf16 (and 12 in fp32): the main thread's forward and
# backward() times, the device thread's CPU and wall time inside the part's vjp, eager with one
# identity autograd.Function (what any Python node costs), and cProfile inside the vjp.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
for n in 12 33 66; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/g/k${n}_bf16.py --force | tail -1; done
python3 -m kgen.cli generate .kb/level2/12_*.py --dtype fp32 -o /tmp/g/k12_fp32.py --force | tail -1
build_files /tmp/g builds.log
t "vjp host"
for f in 12:bf16 33:bf16 66:bf16 12:fp32; do n=${f%:*}; d=${f#*:}
  timeout 80 python3 docs/experiments/s40/vjp_host.py .kb/level2/${n}_*.py $d /tmp/g/k${n}_$d.py > $OUT/vjp_${n}_$d.log 2>&1
  echo "$n $d exit $?"; sed -n 2,5p $OUT/vjp_${n}_$d.log | cut -c1-330; done
t done
