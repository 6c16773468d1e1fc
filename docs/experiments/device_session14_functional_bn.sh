# Session 14: F.batch_norm on a BatchNorm1d's own tensors (s14/refs/functional_batch_norm.py,
# KernelBench 33's module written with it): the full gate in fp32 and bf16 (num_batches_tracked
# left alone, as F.batch_norm leaves it), and the BatchNorm GPU tests after the template's
# _batchnorm_args / _store_running_stats took `counts` (the planted faults include a missing
# num_batches_tracked update; the backward and odd-shape tests run BatchNorm files).
. scripts/device_setup.sh
(timeout 300 python3 -m kgen.tune.worker build s14files/functional_batch_norm.py > /dev/null 2>&1 || echo "build failed") &
(timeout 300 python3 -m kgen.tune.worker build --dtype bf16 s14files/functional_batch_norm.py > /dev/null 2>&1 || echo "build failed bf16") &
wait
for d in fp32 bf16; do
  t "validate functional_batch_norm $d"
  timeout 200 python3 -m kgen validate s14files/functional_batch_norm.py --dtype $d --ref docs/experiments/s14/refs/functional_batch_norm.py 2>&1 | tail -20
done
t "faults and BatchNorm GPU tests"
timeout 420 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_faults.py tests/test_backward_gpu.py -x 2>&1 | tail -4
t done
