# Session 41, call A: a bf16 module's eager training through each part's C++ autograd node
# (kernels/native_backward.cpp) against its Python node and eager (s41/native_ab.py, interleaved),
# on KernelBench files of each kind (point-wise 12, BatchNorm 33, Dropout 66, the 16384-row 39,
# GroupNorm 37, a broadcast tail 75, the pooled weight 98); the node's first build; the GPU tests
# of both nodes' gradients bit for bit and of the 16-bit gradients against fp64.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/g
t "generate"
for n in 12 33 66 39 37 75 98; do python3 -m kgen.cli generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/g/k${n}_bf16.py --force | tail -1; done
t "native node build alone (an empty cache)"
python3 -c "
import time, torch; from kgen.check.loading import EmittedFile
f = EmittedFile('/tmp/g/k12_bf16.py'); t0 = time.perf_counter(); f.module._kgen_native_module(); print(f'C++ node build: {time.perf_counter() - t0:.1f} s')" 2>&1 | tail -2
build_files /tmp/g builds.log
t "A/B"
for n in 12 33 66 39 37 75 98; do
  timeout 60 python3 docs/experiments/s41/native_ab.py .kb/level2/${n}_*.py bf16 /tmp/g/k${n}_bf16.py > $OUT/ab_${n}_bf16.log 2>&1
  echo "$n exit $?"; grep -E "wall" $OUT/ab_${n}_bf16.log | cut -c1-200; done
t "gpu tests"
gpu_tests t_native.log 120 tests/test_half_gpu.py -k "cpp_node"
gpu_tests t_half.log 150 tests/test_half_gpu.py -k "gradients"
t done
