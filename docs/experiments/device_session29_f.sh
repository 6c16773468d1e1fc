# Session 29, call F (issue 24): split-K in the 16-bit GEMM (kernels/gemm_wgmma_half.cuh; SplitK as
# the fp32 GEMMs use it) where the output has too few tiles to fill the GPU: the GPU tier of split-K
# (fp32 unchanged, the new bf16 / fp16 cases), A/B against the session's first code on KernelBench
# 66 and 68 (128 x 16384 -> 16384: 64 tiles) and 12's file at 128 rows, KernelBench's eval of 66, 68.
unset PYTHONDONTWRITEBYTECODE
A=docs/experiments/s29/ab
. scripts/device_setup.sh
(for f in $A/kb66_*.py $A/kb68_*.py $A/kb12_*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16); f.build(torch.float16)" $f & done; wait) > $OUT/f_build.log 2>&1 &
t "gpu tests: split-K"
timeout 300 python3 -m pytest -m gpu -q -rfEx tests/test_split_k_gpu.py > $OUT/f_gpu_tests.log 2>&1
echo "exit $?"; tail -3 $OUT/f_gpu_tests.log | cut -c1-300
wait
t "A/B"
for n in 66 68; do for d in bf16 fp16; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype $d 2>&1 | tail -3
done; done | tee $OUT/f_ab.log | cut -c1-150
for f in $A/kb12_before.py $A/kb12_after.py; do timeout 60 kgen bench $f --batch 128 --dtype bf16 2>&1 | grep -E "ModelNew|eager" | head -3; done | tee -a $OUT/f_ab.log | cut -c1-150
t "KernelBench eval 66 68 at bf16 and fp16"
NUMS="66 68" PRECISIONS="bf16 fp16" EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep -E "^\||^---"
