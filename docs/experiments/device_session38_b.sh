# Session 38, call B: the pooled weight (rewrite.pool_as_weight) on the GPU. KernelBench 98 in
# fp32, bf16 and fp16: the file of 959b065 (before the rewrite; generated into .kb/s38_old/ by
# that commit's kgen, carried) against this tree's, interleaved with eager in one process
# (scripts/compare_forward.py); the full gate on the new files; one training step; the GPU tests
# of the rewrite and of tests/refs' pooled module; KernelBench's eval of 98 at three precisions.
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/b.tar * && find . -mindepth 1 -delete && mv /tmp/b.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
for d in fp32 bf16 fp16; do python3 -m kgen.cli generate .kb/level2/98_*.py --dtype $d -o /tmp/f/k98_${d}_new.py --force | tail -1; done
cp .kb/s38_old/k98_*.py /tmp/f/
build_files /tmp/f builds.log
t "98: before / after / eager, interleaved"
for d in fp32 bf16 fp16; do timeout 60 python3 scripts/compare_forward.py .kb/level2/98_*.py /tmp/f/k98_${d}_old.py /tmp/f/k98_${d}_new.py --dtype $d > $OUT/cmp_98_$d.log 2>&1; echo "== $d (exit $?)"; tail -6 $OUT/cmp_98_$d.log; done
t "validate the new files"
for d in fp32 bf16 fp16; do timeout 90 python3 -m kgen.cli validate /tmp/f/k98_${d}_new.py --dtype $d > $OUT/validate_98_$d.log 2>&1; echo "98 $d exit $?: $(tail -1 $OUT/validate_98_$d.log)"; grep -E '^FAIL' $OUT/validate_98_$d.log | cut -c1-200; done
t "one training step"
for f in k98_fp32_old:fp32 k98_fp32_new:fp32 k98_bf16_old:bf16 k98_bf16_new:bf16; do timeout 60 python3 -m kgen.cli bench /tmp/f/${f%%:*}.py --training --dtype ${f##*:} > $OUT/train_${f%%:*}.log 2>&1
  echo "${f}: exit $? $(grep -E '^ModelNew|^eager' $OUT/train_${f%%:*}.log | tr -s ' ' | cut -c1-60 | tr '\n' ' ')"; done
t tests
gpu_tests t_pool_weight.log 200 -rs tests/test_pool_weight.py
gpu_tests t_refs_avgpool.log 90 -rs tests/test_refs_gpu.py -k avgpool
gpu_tests t_backward_avgpool.log 90 -rs tests/test_backward_gpu.py -k avgpool
t "KernelBench's eval"
NUMS="98" PRECISIONS="fp32 bf16 fp16" EVAL_LIMIT=80 bash scripts/device_kernelbench.sh 2>&1 | grep -vE '^---|^NVIDIA|Successfully' | tail -12
t done
