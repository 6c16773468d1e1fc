# Session 28, call E: GroupNorm / LayerNorm statistics shared among warps where a group is large
# (forward._split_group_pass): the GPU tier of the modules with a LayerNorm or a GroupNorm (fp32
# full gate on both GEMMs, the 16-bit tier), the input-residual tests, and the post-norm block's
# bf16 forward kernel by kernel again, with kgen bench in bf16 / fp16 / fp32.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/e
sed -n '/^cat > \/tmp\/b\/postln.py/,/^PY$/p' docs/experiments/device_session28_b.sh | sed '1d;$d' > /tmp/e/postln.py
(cd /tmp/e && kgen generate postln.py -o postln_new.py --force && python3 -m kgen.tune.worker build postln_new.py) > $OUT/e_build.log 2>&1 &
t "gpu tests"
KGEN_TEST_REFS=layernorm,groupnorm timeout 400 python3 -m pytest -m gpu -q -rfEx tests/test_refs_gpu.py tests/test_half_gpu.py \
  tests/test_input_residual.py > $OUT/e_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/e_gpu_tests.log | cut -c1-300
wait
t "post-norm block: bf16 kernels, bench"
python3 scripts/profile_forward.py /tmp/e/postln_new.py --dtype bf16 --eager > $OUT/e_profile_bf16.log 2>&1
grep -E "==|ms  " $OUT/e_profile_bf16.log | cut -c1-150
(cd /tmp/e && for d in bf16 fp16 fp32; do timeout 60 kgen bench postln_new.py --dtype $d; done) > $OUT/e_bench.log 2>&1
grep -E "ModelNew  |eager (bf16|fp16|fp32)" $OUT/e_bench.log | cut -c1-150
t done
