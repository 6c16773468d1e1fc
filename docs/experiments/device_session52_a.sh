# Session 52, call A: the GPU tests of session 51's last code (1dc2908, the trust mends: not
# GPU-run), 12's and 55's trusted copies re-timed as call F did, and a training forward where w
# changes before every call, trusted and not (s52/changed_w_trusted.py): on trust at <= 256 rows
# each call splits w by the pass where untrusted the GEMM splits it in registers.
source scripts/device_setup.sh
t "build (in the background) and tests"
mkdir -p /tmp/a && cp ab/kb12_fp32.py ab/kb55_fp32.py ab/kb39_fp32.py /tmp/a/
build_files /tmp/a a_builds.log &
gpu_tests a_gpu_w_split.log 200 tests/test_w_split_gpu.py
wait
gpu_tests a_gpu_custom_ops.log 150 tests/test_custom_ops.py
t "kernels, w fixed"
timeout 40 python3 docs/experiments/s49/kernel_times.py .kb/level2/55_*.py fp32 ab/kb55_fp32.py ab/kb55_trusted_fp32.py > $OUT/a_kernels_kb55.md 2>&1; grep -E "split|all kernels" $OUT/a_kernels_kb55.md
S51_AS_EMITTED=1 timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/12_*.py ab/kb12_fp32.py 128 256 1024 ab/kb12_trusted_fp32.py > $OUT/a_rows_kb12.md 2>&1; tail -7 $OUT/a_rows_kb12.md
t "kernels, w changed before every forward"
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/55_*.py ab/kb55_fp32.py ab/kb55_trusted_fp32.py 128 256 > $OUT/a_changed_kb55.md 2>&1; tail -4 $OUT/a_changed_kb55.md
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/12_*.py ab/kb12_fp32.py ab/kb12_trusted_fp32.py 128 256 1024 > $OUT/a_changed_kb12.md 2>&1; tail -5 $OUT/a_changed_kb12.md
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/39_*.py ab/kb39_fp32.py ab/kb39_trusted_fp32.py 256 16384 > $OUT/a_changed_kb39.md 2>&1; tail -4 $OUT/a_changed_kb39.md
t end
