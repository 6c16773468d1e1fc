# Session 52, call H: x's split for short rows (K <= 1024) a warp a row, eight rows a block
# (f16x3_split_short_rows_kernel), where a block a row took 45 us at 16384 x 256 and 33 us at
# 8192 x 1024 (call G). Files before (ab/old/: the kernel as committed) and after (ab/new/):
# KernelBench's 37 (32768 x 1024 -> 4096) and 45 (16384 x 2048 -> 1024: rows of 2048, the block
# kernel still) and five of calls F's and G's shapes, tf32x3's file beside them (ab/tf/). The GPU tests first (w's split, K = 1024 among
# them; the gate at K = 1000), then the same bits before and after (s49/same_bits.py: output,
# dx, every parameter's gradient), then the kernels' device time.
source scripts/device_setup.sh
t "build (in the background) and tests"
(build_files ab/old h_builds_old.log; build_files ab/new h_builds_new.log; build_files ab/tf h_builds_tf.log) &
gpu_tests h_gpu.log 200 tests/test_w_split_gpu.py "tests/test_fp16x3.py::test_fp16x3_files_pass_the_gate_in_training_too[gemm_mul_leakyrelu-1000-shape7]"
wait
t "the same bits"
for n in 37 45; do timeout 30 python3 docs/experiments/s49/same_bits.py .kb/level2/${n}_*.py fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/h_bits_kb$n.md 2>&1; echo "$n: $(tail -3 $OUT/h_bits_kb$n.md | tr '\n' ' ' | cut -c1-300)"; done
for s in 16384_256_32 8192_1024_16 1024_1024_32; do timeout 30 python3 docs/experiments/s49/same_bits.py ab/cal2/ref_$s.py fp32 ab/old/${s}_fp16x3_fp32.py ab/new/${s}_fp16x3_fp32.py > $OUT/h_bits_$s.md 2>&1; echo "$s: $(tail -3 $OUT/h_bits_$s.md | tr '\n' ' ' | cut -c1-300)"; done
t kernels
for n in 37 45; do timeout 40 python3 docs/experiments/s49/kernel_times.py .kb/level2/${n}_*.py fp32 ab/old/kb${n}_fp32.py ab/new/kb${n}_fp32.py > $OUT/h_kernels_kb$n.md 2>&1; grep -E "split|all kernels" $OUT/h_kernels_kb$n.md; done
for s in 16384_256_32 8192_1024_16 1024_1024_32 512_256_128 2048_1024_128; do b=${s%%_*}; S51_AS_EMITTED=1 timeout 30 python3 docs/experiments/s51/w_in_registers_rows.py ab/cal2/ref_$s.py ab/old/${s}_fp16x3_fp32.py $b ab/new/${s}_fp16x3_fp32.py ab/tf/${s}_tf32x3_fp32.py > $OUT/h_rows_$s.md 2>&1; echo "$s: $(tail -2 $OUT/h_rows_$s.md | tr '\n' ' ')"; done
t end
