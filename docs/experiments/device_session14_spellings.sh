# Session 14: the full gate (kgen validate: forward, gradients, training, NaN / magnitude checks)
# in fp32 and bf16 on files of modules written with this session's new spellings
# (docs/experiments/s14/refs: composite activations, expm1 / exp2 / log2 / log10, var / std /
# norm / softmin, views with x.size(0), a (batch,) value unsqueezed), and the GPU tier of the
# op table (each CUDA expression as accurate as torch's fp32 kernel). Files: s14files/.
. scripts/device_setup.sh
for f in s14files/*.py; do
  (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") &
  (timeout 300 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed bf16: $f") &
done
(python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_ops.py > $OUT/ops_gpu.log 2>&1; tail -3 $OUT/ops_gpu.log) &
wait
for r in activations_mix row_statistics row_sum_unsqueezed; do
  for d in fp32 bf16; do
    t "validate $r $d"
    timeout 150 python3 -m kgen validate s14files/$r.py --dtype $d --ref docs/experiments/s14/refs/$r.py 2>&1 | tail -22
  done
done
t done
