# Session 9 (H100), after this session's changes: the 16-bit tests of the BatchNorm modules
# (their statistics changed), then the README's main job with empty caches and rerun (the build
# worker no longer loads the reference). Logs under $OUT.
. scripts/device_setup.sh >/dev/null
t "16-bit BatchNorm tests"
timeout 240 python3 -m pytest -m gpu -q -rfE tests/test_half_gpu.py -k "bn or batchnorm" > $OUT/half_bn_tests.log 2>&1
tail -3 $OUT/half_bn_tests.log
W=/tmp/s9f; rm -rf $W; mkdir -p $W
export KGEN_CACHE_DIR=$W/kc TORCH_EXTENSIONS_DIR=$W/ext
t "the README's main job, empty caches"
/usr/bin/time -f "main job cold: %e s" python3 -m kgen.cli search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 \
  --out-dir $W/g --results-dir $W/r > $OUT/mainjob_cold.log 2>&1
tail -1 $OUT/mainjob_cold.log; grep -E "built|full validation of|fastest valid" $OUT/mainjob_cold.log | cut -c1-160
t "rerun"
/usr/bin/time -f "main job rerun: %e s" python3 -m kgen.cli search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 \
  --out-dir $W/g --results-dir $W/r > $OUT/mainjob_rerun.log 2>&1
tail -1 $OUT/mainjob_rerun.log; grep -E "^\[" $OUT/mainjob_rerun.log | tail -3 | cut -c1-160
t done
