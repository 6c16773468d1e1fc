# Session 51, call A: the GPU tests of session 50's code that no GPU ran (9ecf800's mends: no split
# kept in a capture or CUDA graph trees' warm-up, none for a computed weight, records first and
# written last; 7c6c46c's kOwnGemm), and where w in registers stops paying now that w's split is kept
# (s51/w_in_registers_rows.py: 12 at 1024 x 8192 -> 8192 and 55 at 128 x 32768 -> 32768's files,
# the pass at every batch against w in registers at every batch).
source scripts/device_setup.sh
for n in 12 55; do python3 docs/experiments/s51/w_in_registers_rows.py $(ls .kb/level2/${n}_*.py) ab/kb${n}_fp32.py; done
cp ab/kb*_fp32.py /tmp/s51v/
t "build (in the background) and tests"
build_files /tmp/s51v a_builds.log &
gpu_tests a_gpu_w_split.log 300 tests/test_w_split_gpu.py tests/test_custom_ops.py tests/test_fp16x3.py
gpu_tests a_gpu_fp16x3_paths.log 120 tests/test_keep_z_gpu.py tests/test_split_k_gpu.py -k fp16x3
wait
t "w in registers by rows"
timeout 150 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/12_*.py ab/kb12_fp32.py 256 384 512 640 768 1024 > $OUT/a_rows_kb12.md 2>&1; cat $OUT/a_rows_kb12.md | tail -14
timeout 60 python3 docs/experiments/s51/w_in_registers_rows.py .kb/level2/55_*.py ab/kb55_fp32.py 128 256 512 > $OUT/a_rows_kb55.md 2>&1; cat $OUT/a_rows_kb55.md | tail -8
t end
