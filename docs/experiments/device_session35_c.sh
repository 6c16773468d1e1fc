# Session 35, call C (9d5f845): the matrix-vector rewrite's 16-bit GPU tests (call B's fixture
# failed before they ran), the broadcast tail's 16-bit output (bit for bit the fp32 output
# converted; 75 and 51 against session 34's files in one process), KernelBench 51's searches in
# bf16 / fp16 again at this code (their records for results/), and KernelBench's eval of those
# winners at their precision with eager and max-autotune timed.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t gemv 16-bit GPU tests
gpu_tests gemv.log 200 tests/test_gemv_half.py
t "the tail's 16-bit output"
KGEN_TEST_REFS=groupnorm_min_bias gpu_tests tail.log 150 tests/test_half_gpu.py -k "output_written or forward_and_buffers"
t "A/B in bf16: session 34's files (before_*) against this code's (after_*)"
build_files docs/experiments/s35/ab ab_build.log
for n in 75 51; do
  python3 scripts/compare_forward.py .kb/level2/${n}_*.py docs/experiments/s35/ab/before_$n.py docs/experiments/s35/ab/after_$n.py --dtype bf16 2>&1 | tail -4
done
mkdir -p $OUT/results
for d in bf16 fp16; do
  t "search KernelBench 51 in $d"
  python3 -m kgen.cli search .kb/level2/51_*.py --dtype $d --results-dir $OUT/results --out-dir /tmp/win_51_$d > $OUT/search_51_$d.log 2>&1
  echo "exit $?"; grep -E "fastest valid|failed" $OUT/search_51_$d.log | cut -c1-250
done
rm -f $OUT/results/*.png
for d in bf16 fp16; do
  t "KernelBench's eval of 51's $d winner, eager and max-autotune timed"
  mkdir -p /tmp/kb_$d && cp /tmp/win_51_$d/*_tol0.01_$d.py /tmp/kb_$d/$(basename .kb/level2/51_*.py)
  timeout 170 python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/kb_$d --precision $d --autotune \
    --json $OUT/kb_51_$d.jsonl .kb/level2/51_*.py > $OUT/kb_51_$d.log 2>&1
  tail -4 $OUT/kb_51_$d.log
done
t done
