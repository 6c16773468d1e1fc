# Session 54, call C: what the C++ node does for an fp32 module's host time, interleaved A/Bs
# against its Python node (KGEN_PYTHON_AUTOGRAD=1) and eager: a forward in training mode
# (s54/forward_ab.py, KernelBench's eval's timing) and a training step (s41/native_ab.py), on
# the two-layer head, the 128 x 512 -> 256 -> 10 MLP and 8192 x 1024 -> 16.
source scripts/device_setup.sh
mkdir -p $OUT
t build
build_files ab/h2 builds.log
for r in two_layer_head small_mlp 8192_1024_16; do
  t "$r"
  python3 docs/experiments/s54/forward_ab.py ab/h2/ref_$r.py ab/h2/${r}_fp32.py > $OUT/forward_ab_$r.md 2>&1; tail -3 $OUT/forward_ab_$r.md
  python3 docs/experiments/s41/native_ab.py ab/h2/ref_$r.py fp32 ab/h2/${r}_fp32.py > $OUT/step_ab_$r.md 2>&1; tail -3 $OUT/step_ab_$r.md
done
t done
