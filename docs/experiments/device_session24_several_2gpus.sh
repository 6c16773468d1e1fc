# Session 24: `kgen search` of several KernelBench files on a 2-GPU host (one search per GPU at
# once: tune.several), cold (empty caches); the table at the end states the wall time against
# the searches' own (their sum is what one GPU, one search after another, would take). Carry .kb.
. scripts/device_setup.sh
nvidia-smi --query-gpu=index,name --format=csv,noheader
files=".kb/level2/12_Gemm_Multiply_LeakyReLU.py .kb/level2/40_Matmul_Scaling_ResidualAdd.py .kb/level2/76_Gemm_Add_ReLU.py .kb/level2/63_Gemm_ReLU_Divide.py .kb/level2/86_Matmul_Divide_GELU.py .kb/level2/9_Matmul_Subtract_Multiply_ReLU.py"
t "six files on two GPUs"
/usr/bin/time -f "wall %e s" kgen search $files --gpus all --out-dir $OUT/gen --results-dir $OUT/res > $OUT/s24_several_2gpus.log 2>&1
echo "exit $?"
grep -vE "^\s+(build|eval) " $OUT/s24_several_2gpus.log | grep -E "^(===|file|wall|.*searches|.*x eager|.*GPU)" | cut -c1-180 | tail -30
tail -14 $OUT/s24_several_2gpus.log | cut -c1-180
rm -rf $OUT/gen
t done
