# Session 38, call C: call B found KernelBench 98's bf16 / fp16 files with the pooled weight 2.2-2.3x
# slower than before (0.49 ms against 0.21): the weight's means, an fp64 sum over a strided unfold,
# cost more than the GEMM they save. (1) Each way torch writes the means, timed forward and with
# their backward, with their error (docs/experiments/s38/window_means.py); (2) 98's files with the
# means as unflatten(...).mean(1) (the committed file's text edited in place: experiment only)
# against the committed form and the file of 959b065, in three dtypes; (3) the rewrite's GPU tests
# (their fixture's dtype names fixed).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/c.tar * && find . -mindepth 1 -delete && mv /tmp/c.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
t means
timeout 150 python3 docs/experiments/s38/window_means.py > $OUT/means.log 2>&1; cat $OUT/means.log | cut -c1-170
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/f/k98_${d}_new.py --force | tail -1
  sed -E 's/\.unfold\(0, 16, 16\)\.sum\(-1, dtype=torch\.float64\)\.div\(16\)\.to\([^)]*\.dtype\)/.unflatten(0, (-1, 16)).mean(1)/g' /tmp/f/k98_${d}_new.py > /tmp/f/k98_${d}_mean.py
  grep -c 'unflatten(0, (-1, 16)).mean(1)' /tmp/f/k98_${d}_mean.py; done
cp .kb/s38_old/k98_*.py /tmp/f/
build_files /tmp/f builds.log
t "98: before / fp64 sums / means, interleaved"
for d in fp32 bf16 fp16; do timeout 70 python3 scripts/compare_forward.py .kb/level2/98_*.py /tmp/f/k98_${d}_old.py /tmp/f/k98_${d}_new.py /tmp/f/k98_${d}_mean.py --dtype $d > $OUT/cmp_98_$d.log 2>&1; echo "== $d (exit $?)"; tail -5 $OUT/cmp_98_$d.log | cut -c1-120; done
t "one training step"
for f in k98_fp32_mean:fp32 k98_bf16_mean:bf16; do timeout 60 python3 -m kgen.cli bench /tmp/f/${f%%:*}.py --training --dtype ${f##*:} > $OUT/train_${f%%:*}.log 2>&1
  echo "${f}: exit $? $(grep -E '^ModelNew|^eager' $OUT/train_${f%%:*}.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"; done
t tests
gpu_tests t_pool_weight.log 240 -rs tests/test_pool_weight.py
t done
