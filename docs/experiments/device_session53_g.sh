# Session 53, call G: call F's two-layer head took 212 us by KernelBench's timing (training mode,
# gradients wanted) against 136 us synchronized in eval mode and 31 us of kernels: where a
# training-mode forward's host time goes (s53/train_host.py), for it and for 8192 x 1024 -> 16.
source scripts/device_setup.sh
build_files ab/f g_builds.log
for n in two_layer_head 8192_1024_16; do timeout 120 python3 docs/experiments/s53/train_host.py ab/f/ref_$n.py ab/f/${n}_fp32.py > $OUT/g_train_host_$n.md 2>&1; grep "==" $OUT/g_train_host_$n.md; done
grep -A30 "== two_layer_head_fp32.py" $OUT/g_train_host_two_layer_head.md | head -60
t end
