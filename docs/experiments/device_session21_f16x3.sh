# Session 21: the fp32-exact GEMM from three fp16 products (kgen/codegen/kernels/gemm_wgmma_f16x3.cuh),
# before it is a math mode of the search: kgen's default fp32 file of KernelBench 33, 12, 84 and 39
# beside the same file with its forward GEMM replaced (docs/experiments/s21/f16x3_files.py; STAGES:FLUSH
# 3:1 and 3:2), timed interleaved with eager fp32 (scripts/compare_forward.py, errors against fp64),
# then `kgen validate` (the full gate) of 33's and 39's.  Needs .kb carried (KernelBench's files).
. scripts/device_setup.sh
NUMS=${NUMS:-"33 12 84 39"}
mkdir -p /tmp/f16
for n in $NUMS; do
  ref=$(ls .kb/level2/${n}_*.py)
  kgen generate $ref -o /tmp/f16/base$n.py --force > /dev/null
  python3 docs/experiments/s21/f16x3_files.py /tmp/f16/base$n.py /tmp/f16/f16x3_$n ${CONFIGS:-3:1 3:2} > /dev/null
done
t "build (all files at once)"
for f in /tmp/f16/*.py; do timeout 300 python3 -m kgen.tune.worker build $f > /tmp/f16/$(basename $f).build.log 2>&1 & done; wait
grep -l -i "error" /tmp/f16/*.build.log | head; tail -3 /tmp/f16/f16x3_33_s3_f1.py.build.log
for n in $NUMS; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 240 python3 scripts/compare_forward.py $ref /tmp/f16/base$n.py /tmp/f16/f16x3_${n}_s3_f*.py 2>&1 | tail -8
done
for n in ${VALIDATE:-33 39}; do
  ref=$(ls .kb/level2/${n}_*.py)
  for f in /tmp/f16/f16x3_${n}_s3_f*.py; do
    t "validate $f"
    timeout 150 kgen validate $f --ref $ref > $OUT/validate_$(basename $f .py).log 2>&1
    grep -E "FAIL|gradients|training|passed|replay" $OUT/validate_$(basename $f .py).log | cut -c1-220
  done
done
t done
