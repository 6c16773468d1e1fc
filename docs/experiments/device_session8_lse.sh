# Session 8 (H100): the eager-order row sums once more after the review (logsumexp's sum now in
# eager's order too): tests/test_eager_sum_gpu.py, then KernelBench's eval on the cuBLAS fp32
# files of the published modules with a logsumexp or a sum (18, 45, 51, 55, 64, 14).
. scripts/device_setup.sh >/dev/null
TESTS="tests/test_eager_sum_gpu.py" LOG=eager_sum_tests_2 LIMIT=150 bash scripts/device_gpu_tests.sh
t "cuBLAS fp32 files"
mkdir -p /tmp/cf
for n in 14 18 45 51 55 64; do
  r=$(ls .kb/level2/${n}_*.py)
  python3 -m kgen.cli generate $r --backend cublas --math fp32_simt -o /tmp/cf/$(basename $r) > /dev/null 2>&1 || echo "generate failed: $r"
done
for f in /tmp/cf/*.py; do (timeout 200 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
refs=$(for f in /tmp/cf/*.py; do echo .kb/level2/$(basename $f); done)
timeout 240 python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/cf --precision fp32 $refs > $OUT/kb_cublas_fp32.log 2>&1
grep "^|" $OUT/kb_cublas_fp32.log
t done
