# Session 51, call C: FP16X3_W_IN_REGISTERS_MAX_ROWS 512 -> 256 (call A: w in registers loses to
# the kept split's pass from 384 rows at 1024 x 8192 -> 8192's file, from 512 at 128 x 32768 ->
# 32768's). Its GPU tests (the gate at 250 rows in registers and 1000 in the pass, split-K's
# workspace by the constant, the kept split at 300 rows), then the rows between (320, 448) with
# tf32x3's file beside (where the rule should take fp16x3 with the pass), and 768 x 8192 -> 1024
# (the rule's harmonic: fp16x3 there once w's split is a read?).
source scripts/device_setup.sh
for n in 12 55; do python3 docs/experiments/s51/w_in_registers_rows.py $(ls .kb/level2/${n}_*.py) ab/kb${n}_fp32.py; done
python3 docs/experiments/s51/w_in_registers_rows.py ab/ref768.py ab/r768_fp32.py
cp ab/*_fp32.py /tmp/s51v/
t "build (in the background) and tests"
build_files /tmp/s51v c_builds.log &
gpu_tests c_gpu_threshold.log 300 tests/test_fp16x3.py tests/test_split_k_gpu.py tests/test_w_split_gpu.py -k "fp16x3 or kept_split_is_used"
wait
t "w in registers by rows"
timeout 90 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/12_*.py ab/kb12_fp32.py 256 320 384 448 512 ab/kb12_tf32x3_fp32.py > $OUT/c_rows_kb12.md 2>&1; tail -11 $OUT/c_rows_kb12.md
timeout 60 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/55_*.py ab/kb55_fp32.py 256 320 384 > $OUT/c_rows_kb55.md 2>&1; tail -7 $OUT/c_rows_kb55.md
timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py ab/ref768.py ab/r768_fp32.py 768 ab/r768_tf32x3_fp32.py > $OUT/c_rows_r768.md 2>&1; tail -4 $OUT/c_rows_r768.md
t end
