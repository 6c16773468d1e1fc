# Session 40, call C: a 16-bit build's backward runs no GEMM of its own (torch's run dx and dW),
# so it compiles none and its workspace has no room for one (the transposes' segments: 320 MB
# fp32 at 1024 x 8192 x 8192), on top of call B's conversions in the C entry. The bf16 build's
# time, d933b0c's file against this tree's, each alone with an empty extension cache; then
# s40/vjp_host.py (step, forward, backward(), the vjp's device-thread time, and a step's peak
# memory), d933b0c's files against this tree's, interleaved with eager.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
cp .kb/s40_old/*.py /tmp/g/
for f in 12:bf16 33:bf16 66:bf16 39:bf16 37:bf16; do n=${f%:*}; d=${f#*:}
  python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype $d -o /tmp/g/k${n}_${d}_new.py --force | tail -1; done
t "build time of the bf16 build, each alone, empty cache"
for v in old new; do
  rm -rf /tmp/ext_$v; mkdir -p /tmp/ext_$v
  TORCH_EXTENSIONS_DIR=/tmp/ext_$v python3 -c "
import time; t0 = time.perf_counter()
from kgen.check.loading import EmittedFile; import torch
EmittedFile('/tmp/g/k12_bf16_$v.py').build(torch.bfloat16)
print(f'k12 bf16 $v: built in {time.perf_counter() - t0:.1f} s')" > $OUT/build_time_$v.log 2>&1
  echo "exit $?: $(tail -1 $OUT/build_time_$v.log)"
done
build_files /tmp/g builds.log
t "vjp host and memory, old against new"
for f in 12:bf16 33:bf16 66:bf16 39:bf16 37:bf16; do n=${f%:*}; d=${f#*:}
  timeout 80 python3 docs/experiments/s40/vjp_host.py .kb/level2/${n}_*.py $d /tmp/g/k${n}_${d}_old.py /tmp/g/k${n}_${d}_new.py > $OUT/vjp_${n}_$d.log 2>&1
  echo "$n $d exit $?"; grep -E "wall|peak memory" $OUT/vjp_${n}_$d.log | cut -c1-300; done
t done
