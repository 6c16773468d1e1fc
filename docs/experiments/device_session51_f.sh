# Session 51, call F: on trust (ModelNew.kgen_trust_weight_versions), the GEMM reads a kept split
# of w at batches where it would split w in its registers (at most 256 rows) too. The trust tests
# at 200 and 1024 rows, then 55's file at its 128 rows (s49/kernel_times.py) and 12's at 128 and 256
# (s51/w_in_registers_rows.py, the file as emitted beside its trusted copy), trusted against not.
source scripts/device_setup.sh
t "build (in the background) and tests"
mkdir -p /tmp/f && cp ab/kb12_fp32.py ab/kb55_fp32.py /tmp/f/
build_files /tmp/f f_builds.log &
gpu_tests f_gpu_trust.log 120 tests/test_w_split_gpu.py -k "trusting or kept_split_is_used"
wait
t "kernels"
timeout 40 python3 docs/experiments/s49/kernel_times.py .kb/level2/55_*.py fp32 ab/kb55_fp32.py ab/kb55_trusted_fp32.py > $OUT/f_kernels_kb55.md 2>&1; grep -E "split|all kernels" $OUT/f_kernels_kb55.md
S51_AS_EMITTED=1 timeout 30 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/12_*.py ab/kb12_fp32.py 128 256 ab/kb12_trusted_fp32.py > $OUT/f_rows_kb12.md 2>&1; tail -5 $OUT/f_rows_kb12.md
t end
