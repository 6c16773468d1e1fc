# Session 44, call C: the wgmma bf16 GEMM with x's k permuted (conflict-free reads of w) and the
# registers handed over (setmaxnreg, two wgmmas a group) as its defaults: the A/B macros again
# (g2r1 is the default), Nsight Compute's bank conflicts, its GPU tests, and `kgen search` of
# KernelBench 12 in the 1e-2 tier (tf32 and bf16 candidates: kgen's, cuBLAS's).
source scripts/device_setup.sh
t "generate"
python3 docs/experiments/s44/bf16_variant_files.py /tmp/v .kb/level2 12 39 30 > /dev/null
kgen generate .kb/level2/12_Gemm_Multiply_LeakyReLU.py --backend wgmma --math bf16 -o /tmp/k12.py --force > /dev/null
t "build"
build_files /tmp/v c_build.log
python3 -c "from kgen.check.loading import EmittedFile; import torch; EmittedFile('/tmp/k12.py').build(torch.float32)" > $OUT/c_build12.log 2>&1
t "A/B"
for n in 12 39 30; do
  timeout 80 python3 docs/experiments/s44/relaxed_ab.py $(ls .kb/level2/${n}_*.py) $(ls /tmp/v/k${n}_*.py) > $OUT/c_ab_kb$n.log 2>&1
  cut -c1-150 $OUT/c_ab_kb$n.log
done
t "ncu"
metrics="--metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_pipe_lsu.sum,gpu__time_duration.sum"
timeout 60 ncu --clock-control none -k regex:"wgmma_bf16_kernel" --launch-skip 3 --launch-count 1 \
  $metrics python3 -m kgen.cli bench /tmp/k12.py --iters 10 > $OUT/c_ncu.txt 2>&1
grep -E "wavefronts|conflicts|pipe_lsu|duration" $OUT/c_ncu.txt
t "tests"
gpu_tests c_gpu_wgmma_bf16.log 200 tests/test_wgmma_bf16_gpu.py
t "search"
timeout 150 kgen search .kb/level2/12_Gemm_Multiply_LeakyReLU.py --tol 1e-2 --math tf32 --math bf16 \
  --out-dir $OUT/c_search12 --results-dir $OUT/c_search12 > $OUT/c_search12.log 2>&1
echo "search exit $?"; tail -25 $OUT/c_search12.log | cut -c1-200
t "end"
