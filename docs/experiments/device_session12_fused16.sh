# Session 12, second device call: the rest of the 16-bit GPU tests after b823cfe (parameters in
# the module's dtype), and whether the fused statistics (fusion 2: the GEMM's epilogue writes
# BatchNorm's partials, no statistics kernel reading S again) win in bf16 at batch 1024, where
# the fp32 rule picks fusion 1: s12files/h<NUM>_b_new.py (fusion 1) against f<NUM>_fused.py,
# interleaved with eager bf16 (scripts/compare_forward.py --dtype bf16). Carry .kb.
. scripts/device_setup.sh
for f in s12files/h*_b_new.py s12files/f*_fused.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
done; wait
for n in 33 84 97; do
  t "fusion 1 vs 2, $n bf16"
  timeout 100 python3 scripts/compare_forward.py $(ls .kb/level2/${n}_*.py) s12files/h${n}_b_new.py s12files/f${n}_fused.py --dtype bf16 2>&1 | tee $OUT/fused16_$n.log | grep -v rounds: | head -4
done
t "gpu tests (16-bit)"
timeout ${TESTS_LIMIT:-400} python3 -m pytest -m gpu -q -n 4 tests/test_half_gpu.py > $OUT/params_gpu_tests.log 2>&1; tail -4 $OUT/params_gpu_tests.log
t done
