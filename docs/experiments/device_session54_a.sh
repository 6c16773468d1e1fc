# Session 54, call A: small modules' host time in eager training, piece by piece (s54/host_parts.py):
# the two-layer head (4096 x 1024 -> 64 -> 40), 8192 x 1024 -> 16, a 128 x 512 -> 256 -> 10 MLP;
# fp32 and bf16 (the C++ node's path).
source scripts/device_setup.sh
mkdir -p $OUT
t build
build_files ab/h builds.log
for r in two_layer_head small_mlp; do
  for mode in fp32 bf16; do
    t "$r $mode"
    python3 docs/experiments/s54/host_parts.py ab/h/ref_$r.py ab/h/${r}_fp32.py $mode > $OUT/host_${r}_$mode.md 2>&1
    tail -3 $OUT/host_${r}_$mode.md
  done
done
t "8192_1024_16 fp32"
python3 docs/experiments/s54/host_parts.py ab/h/ref_8192_1024_16.py ab/h/8192_1024_16_fp32.py fp32 > $OUT/host_8192_1024_16_fp32.md 2>&1
t done
