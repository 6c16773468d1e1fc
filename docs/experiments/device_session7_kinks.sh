# Session 7, second call (H100): the gradient checks with kgen/check/kinks.py. The split-K full
# gate test (was a strict xfail), KernelBench 30 (GroupNorm -> Hardtanh) generated for 128 rows
# and validated in full there (it failed the same way in session 6's --also-batch search), then
# the GPU tests that run the gradient and training checks on every reference module.
. scripts/device_setup.sh >/dev/null
t "kernelbench 30 at 128 rows"
f=$OUT/kb30_b128.py
python3 -m kgen.cli generate .kb/level2/30_Gemm_GroupNorm_Hardtanh.py --batch 128 -o $f > $OUT/kb30_generate.log 2>&1
echo "generate exit $?"; tail -2 $OUT/kb30_generate.log
timeout 200 python3 -m kgen.cli validate $f --batch 128 > $OUT/kb30_validate_128.log 2>&1; echo "exit $?"
cut -c1-260 $OUT/kb30_validate_128.log
TESTS="tests/test_split_k_gpu.py tests/test_refs_gpu.py tests/test_backward_gpu.py" LIMIT=${LIMIT:-330} \
  bash scripts/device_gpu_tests.sh
t done
