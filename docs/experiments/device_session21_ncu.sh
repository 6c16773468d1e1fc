# Session 21: Nsight Compute (clocks left alone) on the fp16x3 GEMM and its split kernel, in the
# shipped gemm_scale_bn file at 1024x8192->8192 (the README's main job's winner), fp32.
. scripts/device_setup.sh >/dev/null
f=generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy"
metrics="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_bytes.sum.per_second,dram__bytes.sum.per_second"
for k in wgmma_f16x3_kernel f16x3_split_kernel; do
  t "ncu $k"
  timeout 200 ncu --clock-control none -k regex:"$k" --launch-skip 3 --launch-count 1 \
    $sections $metrics python3 -m kgen.cli bench $f --iters 10 > $OUT/ncu_$k.txt 2>&1
  echo "exit $?"; grep -E "Duration|Throughput|gmma|Registers Per|Stall|Issued Warp|No Eligible|lts__t_bytes|dram__bytes|wavefronts|Achieved Occupancy" $OUT/ncu_$k.txt | head -30
done
t done
