# Session 15: FLUSH 8 as the default (kgen/tune/spec.py). The flush variants of
# docs/experiments/s15/flush_variants.py against eager (KernelBench 56 and 33; s15files/ written
# on the CPU machine from FLUSH 2 files: base = 2), then `kgen validate` (the full gate, gradients
# and training included) of the new default files of 56 and 33, then the split-K and ragged-K
# GPU tests; KernelBench's eval on all 36 files at fp32 in a second call.
# Carry .kb (KernelBench).
. scripts/device_setup.sh
for f in s15files/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -20 /tmp/build_$(basename $f .py).log; }) &
done
mkdir -p /tmp/d
for n in 56 33; do python3 -m kgen.cli generate $(ls .kb/level2/${n}_*.py) -o /tmp/d/k$n.py --force | grep -E "^wrote"; done
wait
t "built"
for n in 56 33; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout 150 python3 scripts/compare_forward.py $ref $(ls s15files/k${n}_*.py) 2>&1 | tee $OUT/compare_$n.log
  t "validate $n"
  timeout 200 python3 -m kgen.cli validate /tmp/d/k$n.py --ref $ref > $OUT/validate_$n.log 2>&1; echo "exit $?"; tail -30 $OUT/validate_$n.log
done
t "gpu tests"
timeout 240 python3 -m pytest -m gpu -q tests/test_split_k_gpu.py tests/test_gpu.py -k ragged_features > $OUT/gpu_tests.log 2>&1; tail -4 $OUT/gpu_tests.log
t done
# Then, in a call of its own: PRECISIONS=fp32 bash scripts/device_kernelbench.sh
