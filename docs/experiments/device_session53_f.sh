# Session 53, call F: why small narrow modules lose to eager by KernelBench's timing (call C):
# 8192 x 1024 -> 16, the kernels 18 us against eager's 27, KernelBench's timing 0.54x; the
# two-layer head (4096 x 1024 -> 64 -> 40, log_softmax) slower in every measure. The host's time
# per forward and its cProfile (s47/forward_host.py), KernelBench's timing replayed
# (s47/kb_timing_ab.py), and the head's kernels (s49/kernel_times.py).
source scripts/device_setup.sh
t "builds"
build_files ab/f f_builds.log
t "host"
for n in 8192_1024_16 two_layer_head; do timeout 120 python3 docs/experiments/s47/forward_host.py ab/f/ref_$n.py fp32 ab/f/${n}_fp32.py > $OUT/f_host_$n.md 2>&1; head -30 $OUT/f_host_$n.md | grep -vE "^\s*$" | head -14; done
t "KernelBench's timing"
for n in 8192_1024_16 two_layer_head head_softmax; do timeout 120 python3 docs/experiments/s47/kb_timing_ab.py ab/f/ref_$n.py fp32 ab/f/${n}_fp32.py > $OUT/f_kb_$n.md 2>&1; tail -5 $OUT/f_kb_$n.md; done
t "kernels"
timeout 60 python3 docs/experiments/s49/kernel_times.py ab/f/ref_two_layer_head.py fp32 ab/f/two_layer_head_fp32.py > $OUT/f_kernels_head.md 2>&1; grep "^|" $OUT/f_kernels_head.md
t end
