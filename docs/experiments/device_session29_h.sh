# Session 29, call H (issue 24): S in a 16-bit module's dtype where a point-wise stage 2 alone
# reads it (fusion 0: KernelBench 29, 95, 86, 45 in bf16), A/B against the session's first code;
# fusion 0 and 1 bit for bit alike in 16 bits; the 16-bit GPU tier of the point-wise modules.
unset PYTHONDONTWRITEBYTECODE
A=docs/experiments/s29/ab
. scripts/device_setup.sh
(for f in $A/kb29_*.py $A/kb95_*.py $A/kb86_*.py $A/kb45_*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/h_build.log 2>&1 &
t "gpu tests"
KGEN_TEST_REFS=swish,leakyrelu,sub_mul timeout 200 python3 -m pytest -m gpu -q -rfEx tests/test_fusion0.py tests/test_half_gpu.py > $OUT/h_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/h_gpu_tests.log | cut -c1-300
wait
t "A/B"
for n in 29 95 86 45; do
  timeout 50 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/h_ab.log | cut -c1-150
t done
