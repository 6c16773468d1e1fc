# Session 29, call D (issue 24): pointwise_kernel taking four rows per step (each column's operands
# loaded once for them), A/B against call B's kernel (docs/experiments/s29/ab/*_after.py, one row
# per step) and the session's first code (*_before.py) on KernelBench 39, 33, 97 in bf16 and fp32;
# the GPU tier of the paths that run it (stage 2, the forward that keeps z, cuBLAS's epilogue).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s29/ab
(for f in $A/kb39_*.py $A/kb33_*.py $A/kb97_*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16); f.build(torch.float32)" $f & done; wait) > $OUT/d_build.log 2>&1 &
t "gpu tests (pointwise stage 2, forward keeping z, cuBLAS epilogue)"
KGEN_TEST_REFS=bn_,swish,leakyrelu,gelu_relu timeout 300 python3 -m pytest -m gpu -q -rfEx tests/test_backward_gpu.py \
  tests/test_cublas_backward_gpu.py tests/test_half_gpu.py tests/test_fusion0.py > $OUT/d_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/d_gpu_tests.log | cut -c1-300
wait
grep -iE "error" $OUT/d_build.log | head -5
t "A/B"
for n in 39 33 97; do for d in bf16 fp32; do
  timeout 80 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py $A/kb${n}_after2.py --dtype $d 2>&1 | tail -4
done; done | tee $OUT/d_ab.log | cut -c1-150
python3 scripts/profile_forward.py $A/kb39_after2.py --dtype bf16 > $OUT/d_profile_39.log 2>&1
grep -E "==|ms  " $OUT/d_profile_39.log | cut -c1-120
t done
