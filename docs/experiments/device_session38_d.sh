# Session 38, call D: the pooled weight's final form (means summed in fp32 by torch's mean) on the
# GPU: its GPU tests; KernelBench 98 before (959b065's files, .kb/s38_old/) and after, interleaved
# with eager, in three dtypes; one training step; KernelBench's eval of 98 at fp32, and at bf16 and
# fp16 with max-autotune's time beside it (issue 24's yardstick).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/d.tar * && find . -mindepth 1 -delete && mv /tmp/d.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/f/k98_${d}_new.py --force | tail -1; done
cp .kb/s38_old/k98_*.py /tmp/f/
build_files /tmp/f builds.log
t tests
gpu_tests t_pool_weight.log 200 -rs tests/test_pool_weight.py
gpu_tests t_refs_avgpool.log 90 -rs tests/test_refs_gpu.py -k avgpool
gpu_tests t_backward_avgpool.log 90 -rs tests/test_backward_gpu.py -k avgpool
t "98: before / after / eager, interleaved"
for d in fp32 bf16 fp16; do timeout 60 python3 scripts/compare_forward.py .kb/level2/98_*.py /tmp/f/k98_${d}_old.py /tmp/f/k98_${d}_new.py --dtype $d > $OUT/cmp_98_$d.log 2>&1; echo "== $d (exit $?)"; tail -4 $OUT/cmp_98_$d.log | cut -c1-110; done
t "one training step"
for f in k98_fp32_new:fp32 k98_bf16_new:bf16 k98_fp16_new:fp16; do timeout 60 python3 -m kgen.cli bench /tmp/f/${f%%:*}.py --training --dtype ${f##*:} > $OUT/train_${f%%:*}.log 2>&1
  echo "${f}: exit $? $(grep -E '^ModelNew|^eager' $OUT/train_${f%%:*}.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"; done
t "KernelBench's eval"
NUMS="98" PRECISIONS="fp32" EVAL_LIMIT=80 bash scripts/device_kernelbench.sh 2>&1 | grep -E '^\||correct under'
NUMS="98" PRECISIONS="bf16 fp16" KB_FLAGS="--autotune" EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep -E '^\||correct under'
t done
