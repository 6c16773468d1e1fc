# Session 46, call H: call A's two failures again with the gate's new yardstick for bf16 products
# (eager on bf16-rounded operands: test_wgmma_round16_gpu, bf16 gemm_scale_bn at 129 x 96 -> 200),
# then 66's 1e-2 search (128 rows, the one-tile CTA) with the device time left.
source scripts/device_setup.sh
t "round16 tests"
gpu_tests h_gpu_round16.log 150 tests/test_wgmma_round16_gpu.py -k "bf16 and gemm_scale_bn and 129-96-200"
left=$(( 330 - ($(date +%s) - start) ))
t "search 66 (limit ${left}s)"
timeout $left kgen search $(ls .kb/level2/66_*.py) --tol 1e-2 --math tf32 --math bf16 --math fp16 \
  --out-dir $OUT/h_s66 --results-dir $OUT/h_s66 > $OUT/h_search66.log 2>&1
echo "search exit $?"; grep -E "fastest valid|no candidate" $OUT/h_search66.log | cut -c1-220
t "end"
