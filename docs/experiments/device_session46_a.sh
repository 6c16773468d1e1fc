# Session 46, call A: what session 45 left un-run on the GPU (docs/experiments/device_session46_next.sh,
# items 0 and 1): the whole round16 GPU test (the review's cases: the products at 100 rows, fp16 at
# K % 8 != 0), then the 1e-2 searches of 56, 59 (55's shape, 128 rows) and 66 (68's) with the
# one-tile CTA, each with the device time left.
source scripts/device_setup.sh
t "round16 tests"
gpu_tests a_gpu_round16.log 330 tests/test_wgmma_round16_gpu.py
for n in 59 56 66; do
  left=$(( 555 - ($(date +%s) - start) ))
  [ $left -lt 60 ] && { t "no time for $n"; continue; }
  t "search $n (limit ${left}s)"
  timeout $left kgen search $(ls .kb/level2/${n}_*.py) --tol 1e-2 --math tf32 --math bf16 --math fp16 \
    --out-dir $OUT/a_s$n --results-dir $OUT/a_s$n > $OUT/a_search$n.log 2>&1
  echo "search exit $?"; grep -E "fastest valid|no candidate" $OUT/a_search$n.log | cut -c1-220
done
t "end"
