# Session 7, first call (H100): why every candidate failed kgen validate's full tier at 128 rows
# (split-K) in session 6's `kgen search --also-batch 128`. The file of tests/test_split_k_gpu.py
# (gemm_mul_leakyrelu 4096->4096, wgmma tf32x3 128x128x32, 4 stages) validated in full at 128 rows
# (split) and at 4096 (unsplit), every check's line kept; then the GPU tests of the skinny and
# split-K kernels (fp16 included).
. scripts/device_setup.sh >/dev/null
f=$OUT/split.py
python3 -m kgen.cli generate tests/refs/gemm_mul_leakyrelu.py --batch 128 --in 4096 --out 4096 --backend wgmma \
  --math tf32x3 --tile 128x128x32 --stages 4 -o $f > $OUT/generate.log 2>&1; echo "generate exit $?"
for b in 128 4096; do
  t "validate at $b"
  timeout 200 python3 -m kgen.cli validate $f --batch $b > $OUT/validate_$b.log 2>&1; echo "exit $?"
  cat $OUT/validate_$b.log | cut -c1-300
done
t "split-K and skinny GPU tests"
timeout 240 python3 -m pytest -q -m gpu tests/test_split_k_gpu.py tests/test_skinny_gpu.py -rx -x \
  > $OUT/pytest.log 2>&1; echo "exit $?"; tail -15 $OUT/pytest.log
t done
