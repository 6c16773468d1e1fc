# Session 7, last call (H100): a few-row call's host time before and after the direct path
# (_part_call: eager inference calls the part's kernels without the custom op; _build's fast
# path; no device guard where the device is current), on the 4096-wide module and KernelBench 12
# at 7 rows; then the GPU tests of the custom ops (torch.compile fullgraph, CUDA graphs, autograd).
. scripts/device_setup.sh >/dev/null
t "host overhead at 7 rows"
timeout 240 python3 docs/experiments/host_overhead.py 7 ${FILES:-s7exp/small_before.py s7exp/small_after.py \
  s7exp/kb12_before.py s7exp/kb12_after.py} > $OUT/host_overhead.log 2>&1; echo "exit $?"; cat $OUT/host_overhead.log
TESTS="tests/test_custom_ops.py tests/test_gpu.py" LIMIT=280 bash scripts/device_gpu_tests.sh
