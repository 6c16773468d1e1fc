# Session 27, call B (H100, ~9 min), on s27-dev: the two branches session 26 compile-tested only.
# 1. split-K in the fp16x3 GEMM (s26-f16x3-splitk): its GPU tests, the fp16x3 tests, and the
#    file at batch 128 against tf32x3's (before: 0.210 ms fp16x3, 0.179 ms tf32x3 for 30).
# 2. the persistent 16-bit GEMM (s26-half-persistent): bit for bit against one CTA per tile, then
#    timed against it and eager bf16 (docs/experiments/s26/half_persistent_bench.py).
# Correctness runs build side by side; the timings run after, on a quiet GPU.
. scripts/device_setup.sh
mkdir -p /tmp/hp /tmp/sk
t "tests and builds, side by side"
(timeout 420 python3 -m pytest -m gpu -q -rfEx tests/test_split_k_gpu.py tests/test_fp16x3.py > $OUT/splitk_tests.log 2>&1
 echo "exit $?" >> $OUT/splitk_tests.log) &
a=$!
(timeout 420 python3 -m pytest -m gpu -v -rfEx tests/test_half_persistent_gpu.py > $OUT/half_persistent_tests.log 2>&1
 echo "exit $?" >> $OUT/half_persistent_tests.log) &
b=$!
(for m in "fp16x3 --stages 3" "tf32x3 --stages 4"; do set -- $m
   kgen generate tests/refs/gemm_mul_leakyrelu.py --math $1 --backend wgmma --tile 128x128x32 $2 $3 --batch 128 -o /tmp/sk/$1_128.py --force
   python3 -m kgen.tune.worker build /tmp/sk/$1_128.py
 done > $OUT/splitk_prepare.log 2>&1) &
c=$!
timeout 400 python3 docs/experiments/s26/half_persistent_bench.py prepare /tmp/hp > $OUT/half_persistent_prepare.log 2>&1
echo "prepare exit $?"; grep -E "^build|rror" $OUT/half_persistent_prepare.log | cut -c1-200
wait $a $b $c
t "tests done"
grep -E "^exit|passed|failed" $OUT/splitk_tests.log | tail -3; grep -E "FAILED|ERROR" $OUT/splitk_tests.log | head | cut -c1-300
grep -E "PASSED|FAILED|ERROR|^exit" $OUT/half_persistent_tests.log | cut -c1-250
t "fp16x3 vs tf32x3 at 128 rows"
for f in fp16x3 tf32x3; do timeout 60 kgen bench /tmp/sk/${f}_128.py --batch 128 2>&1 | tail -4; done | tee $OUT/splitk_bench.txt
t "persistent vs one tile per CTA, eager bf16"
timeout 120 python3 docs/experiments/s26/half_persistent_bench.py time /tmp/hp 2>&1 | tee $OUT/half_persistent_times.txt | cut -c1-300
t done
