# Session 52, call C: on trust, a batch small enough for w in registers is handed the kept split
# only once w's version held for a call (call B: a training forward on trust at 128 rows paid the
# pass on every call, 55's 1685 -> 4723 us, 12's 125 -> 245); and the kept split's Python and
# size exports only in files whose GEMM splits w (fp16x3). The GPU tests of both (w's split and
# trust, captures and torch.compile), then call B's training forward and call A's fixed-w rows on
# the new files: trusted should now cost what untrusted does where w changes, and still gain
# where it does not.
source scripts/device_setup.sh
t "build (in the background) and tests"
mkdir -p /tmp/c && cp ab/kb12_fp32.py ab/kb55_fp32.py /tmp/c/
build_files /tmp/c c_builds.log &
gpu_tests c_gpu_w_split.log 200 tests/test_w_split_gpu.py
wait
gpu_tests c_gpu_custom_ops.log 180 tests/test_custom_ops.py
t "kernels, w changed before every forward"
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/55_*.py ab/kb55_fp32.py ab/kb55_trusted_fp32.py 128 > $OUT/c_changed_kb55.md 2>&1; tail -3 $OUT/c_changed_kb55.md
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/12_*.py ab/kb12_fp32.py ab/kb12_trusted_fp32.py 128 256 1024 > $OUT/c_changed_kb12.md 2>&1; tail -5 $OUT/c_changed_kb12.md
t "kernels, w fixed"
S51_AS_EMITTED=1 timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/12_*.py ab/kb12_fp32.py 128 256 ab/kb12_trusted_fp32.py > $OUT/c_rows_kb12.md 2>&1; tail -5 $OUT/c_rows_kb12.md
timeout 40 python3 docs/experiments/s49/kernel_times.py .kb/level2/55_*.py fp32 ab/kb55_fp32.py ab/kb55_trusted_fp32.py > $OUT/c_kernels_kb55.md 2>&1; grep -E "all kernels" $OUT/c_kernels_kb55.md
t end
