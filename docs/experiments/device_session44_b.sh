# Session 44, call B: the wgmma bf16 GEMM's A/B macros (s44/bf16_variant_files.py: one wgmma a group
# without setmaxnreg, the default, against setmaxnreg with one or two a group) on KernelBench 12
# and 39 (s44/relaxed_ab.py); Nsight Compute on its kernel and on the same file's 16-bit GEMM (the
# module in bf16); its GPU tests with the tolerances per problem.
source scripts/device_setup.sh
t "generate"
python3 docs/experiments/s44/bf16_variant_files.py /tmp/v .kb/level2 12 39 > /dev/null
kgen generate .kb/level2/12_Gemm_Multiply_LeakyReLU.py --backend wgmma --math bf16 -o /tmp/k12.py --force > /dev/null
t "build"
build_files /tmp/v b_build.log
python3 -c "from kgen.check.loading import EmittedFile; import torch; f = EmittedFile('/tmp/k12.py'); f.build(torch.float32); f.build(torch.bfloat16)" > $OUT/b_build12.log 2>&1
t "A/B"
for n in 12 39; do
  timeout 80 python3 docs/experiments/s44/relaxed_ab.py $(ls .kb/level2/${n}_*.py) $(ls /tmp/v/k${n}_*.py) > $OUT/b_ab_kb$n.log 2>&1
  cut -c1-150 $OUT/b_ab_kb$n.log
done
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
metrics="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_pipe_lsu.sum"
for case in "wgmma_bf16_kernel fp32" "wgmma_half_kernel bf16"; do
  set -- $case
  t "ncu $1"
  timeout 100 ncu --clock-control none -k regex:"$1" --launch-skip 3 --launch-count 1 \
    $sections $metrics python3 -m kgen.cli bench /tmp/k12.py --iters 10 --dtype $2 > $OUT/b_ncu_$1.txt 2>&1
  echo "exit $?"; grep -E "Duration|Throughput|gmma|Registers Per|Stall|Issued Warp|No Eligible|wavefronts|conflicts|pipe_lsu" $OUT/b_ncu_$1.txt | head -24
done
t "tests"
gpu_tests b_gpu_wgmma_bf16.log 250 tests/test_wgmma_bf16_gpu.py
t "end"
