# Session 6, first call (H100): what session 5 built without a GPU, then Nsight Compute on the
# two Hopper GEMMs at 1024x8192->8192.
#  1. kgen search --dtype bf16 --vs-compile on KernelBench 12 and 84, KernelBench's eval at bf16
#     on the winners (scripts/device_kernelbench_search.sh).
#  2. kgen validate --tol 1e-2 of the shipped 1e-2 softmax file (the training check's eager now in
#     the file's TF32 math).
#  3. ncu (clocks left alone) on the tf32x3 warp-specialized kernel (fp32) and the 16-bit kernel
#     (bf16) of the shipped gemm_scale_bn file.
DTYPE=bf16 VS_COMPILE=1 NUMS="${NUMS:-12 84}" SEARCH_LIMIT=${SEARCH_LIMIT:-200} EVAL_LIMIT=150 \
  bash scripts/device_kernelbench_search.sh
. scripts/device_setup.sh >/dev/null
t "validate the shipped 1e-2 softmax file"
timeout 120 python3 -m kgen.cli validate generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.01.py --tol 1e-2 \
  > $OUT/validate_softmax_tol0.01.log 2>&1; echo "exit $?"; tail -4 $OUT/validate_softmax_tol0.01.log
f=generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
metrics="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,lts__t_bytes.sum.per_second,dram__bytes.sum.per_second"
for d in fp32 bf16; do
  t "ncu $d"
  timeout 150 ncu --clock-control none -k regex:"wgmma_(ws|half)_kernel" --launch-skip 3 --launch-count 1 \
    $sections $metrics python3 -m kgen.cli bench $f --dtype $d --iters 10 > $OUT/ncu_$d.txt 2>&1
  echo "exit $?"; grep -E "Duration|Throughput|gmma|Registers|Stall|Issued Warp|No Eligible|lts__t_bytes|dram__bytes|wavefronts" $OUT/ncu_$d.txt | head -40
done
t done
